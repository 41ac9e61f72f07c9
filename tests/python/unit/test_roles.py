"""verl roles and worker groups (issue 38): names as verl 0.9.1 makes them, read without verl.

The classes below are built the way `verl/single_controller/ray/base.py` (0.9.1) builds them:
`create_colocated_worker_cls` binds `<role>_<method>` closures over `key` and `name` onto a
`WorkerDict` whose instance keeps `worker_dict`; `create_colocated_worker_raw_cls` makes
`FusedWorker_<roles>` with `raw_cls_dict` and `_fuw_execute("<role>_fwmn_<method>")`; a
`RayWorkerGroup` names actors `f"{name_prefix}{Class}_{pg_idx}:{local_rank}"` and sets
`WG_PREFIX`. Where verl itself is installed, the last test uses verl's own functions.
"""

from __future__ import annotations

import pickle
import sys

import pytest

from raysleuth.agent.identity import Identity, role_at
from raysleuth.broker.groups.book import GroupBook
from raysleuth.broker.workers.snapshot import StateSnapshot, merge_workers
from raysleuth.model.roles import call_in, role_in, roles_of, user_task, worker_group_of
from raysleuth.model.scope import split_condition
from raysleuth.model.worker import Worker

MAGIC_ATTR = "attrs_3141562937"  # verl.single_controller.base.decorator.MAGIC_ATTR


class Worker_:  # verl's `Worker` base, reduced to what the fused classes touch
    def __init__(self):
        self.fused_worker_dict = {}


def register(fn):
    setattr(fn, MAGIC_ATTR, {"dispatch_mode": "ONE_TO_ALL"})
    return fn


class RoleBase(Worker_):
    def shared(self):
        """A method both roles run (their common base class)."""
        return sys._getframe()


class ActorRole(RoleBase):
    @register
    def update_actor(self):
        return self.shared()

    @register
    def here(self):
        return sys._getframe()


class CriticRole(RoleBase):
    @register
    def update_critic(self):
        return self.shared()


def colocated(class_dict: dict) -> type:
    """`create_colocated_worker_cls` as verl 0.9.1 writes it (without Ray)."""

    class WorkerDict(Worker_):
        def __init__(self):
            super().__init__()
            self.worker_dict = {k: c() for k, c in class_dict.items()}

    for key, cls in class_dict.items():
        for method_name in dir(cls):
            method = getattr(cls, method_name)
            if not hasattr(method, MAGIC_ATTR):
                continue

            def generate_function(name, key=key):
                def func(self, *args, **kwargs):
                    return getattr(self.worker_dict[key], name)(*args, **kwargs)

                return func

            setattr(WorkerDict, key + "_" + method_name, generate_function(method_name))
    return WorkerDict


def fused(class_dict: dict) -> type:
    """`create_colocated_worker_raw_cls` as verl 0.9.1 writes it (without Ray)."""
    cls_names = list(class_dict)

    class FusedWorker(Worker_):
        def __init__(self):
            super().__init__()
            for cls_name, udc in class_dict.items():
                self.fused_worker_dict[cls_name] = udc()
                setattr(self, cls_name, self.fused_worker_dict[cls_name])

        def _fuw_execute(self, method_name: str, *args, **kwargs):
            names = method_name.split("_fwmn_")
            cls_name = names[0]
            method_name = names[1]
            return getattr(self.fused_worker_dict[cls_name], method_name)(*args, **kwargs)

    renamed = type("_".join(["FusedWorker", *cls_names]), (FusedWorker,), {})
    renamed.is_fused_worker = True
    renamed.raw_cls_dict = dict(class_dict)
    return renamed


ROLES = {"actor": ActorRole, "critic": CriticRole}
BOTH = [{"name": "actor", "class_name": "ActorRole"}, {"name": "critic", "class_name": "CriticRole"}]


def test_the_worker_group_is_verls_name_prefix_from_the_env_or_the_actor_name():
    # f"{name_prefix}{cia_name}_{pg_idx}:{local_rank}" with a given and a random prefix
    assert worker_group_of("CriticWorker", "criticCriticWorker_0:1") == "critic"
    assert worker_group_of("WorkerDict", "aB3xYzWorkerDict_0:0") == "aB3xYz"
    assert worker_group_of("FusedWorker_actor_critic", "q9FusedWorker_actor_critic_2:5") == "q9"
    assert worker_group_of("Learner", "Learner_0:0") is None  # no prefix
    assert worker_group_of("Learner", "my-learner") is None  # not verl's shape
    assert worker_group_of("Other", "criticCriticWorker_0:1") is None  # the class must be in it
    assert worker_group_of(None, None, "critic") == "critic"  # WG_PREFIX wins
    assert worker_group_of("CriticWorker", "xCriticWorker_0:1", "critic") == "critic"


def test_roles_of_a_colocated_class_name_its_roles_before_init_and_their_classes_after():
    cls = colocated(ROLES)
    assert roles_of(cls) == [{"name": "actor", "class_name": None}, {"name": "critic", "class_name": None}]
    inst = cls()
    assert roles_of(cls, inst) == BOTH
    assert roles_of(Worker_) == [] and roles_of(ActorRole, ActorRole()) == []

    def made(key, name):  # the user's own closure over `key` and `name`: no role
        def func(self):
            return key, name

        return func

    assert roles_of(type("Mine", (), {"get": made("a", "b")})) == []


def test_roles_of_a_fused_class_are_known_from_the_class_alone():
    cls = fused(ROLES)
    assert cls.__name__ == "FusedWorker_actor_critic"
    assert roles_of(cls) == BOTH


def test_the_task_is_the_roles_own_method():
    roles = [{"name": "actor_rollout", "class_name": "ActorRolloutRefWorker"},
             {"name": "actor_rollout_ref", "class_name": "ActorRolloutRefWorker"},
             {"name": "critic", "class_name": "CriticWorker"}]  # fmt: skip
    assert user_task("WorkerDict.actor_rollout_update_actor", roles) == (
        "ActorRolloutRefWorker.update_actor",
        "actor_rollout",
    )
    assert user_task("WorkerDict.actor_rollout_ref_compute_ref_log_prob", roles)[1] == "actor_rollout_ref"
    assert user_task("WorkerDict.critic_update_critic", roles) == ("CriticWorker.update_critic", "critic")
    assert user_task("WorkerDict.__ray_ready__", roles) == ("WorkerDict.__ray_ready__", None)
    fuw = "FusedWorker_actor_critic._fuw_execute"
    assert user_task(fuw, BOTH) == (fuw, None)  # no call seen: Ray's name stays
    assert user_task(fuw, BOTH, {"role": "critic", "task": "CriticRole.update_critic"}) == (
        "CriticRole.update_critic",
        "critic",
    )
    assert user_task("Learner.step", []) == ("Learner.step", None)


def test_the_role_running_now_is_found_on_the_stack():
    f = fused(ROLES)()
    frame = f._fuw_execute("critic_fwmn_update_critic")  # returns the frame of `shared`
    assert call_in(frame, BOTH) == {"role": "critic", "task": "CriticRole.update_critic"}
    assert role_in(frame, BOTH) == "critic"  # `shared` runs for the critic
    d = colocated(ROLES)()
    frame = d.actor_update_actor()
    assert call_in(frame, BOTH) == {"role": "actor", "task": "ActorRole.update_actor"}
    assert role_in(frame, BOTH) == "actor"
    assert call_in(sys._getframe(), BOTH) is None and role_in(sys._getframe(), BOTH) is None
    # One class for two roles (verl's ActorRolloutRefWorker as actor_rollout and ref): the
    # role call tells, not the class.
    twin = [{"name": "actor", "class_name": "ActorRole"}, {"name": "ref", "class_name": "ActorRole"}]
    ref = fused({"actor": ActorRole, "ref": ActorRole})()
    assert role_in(ref._fuw_execute("ref_fwmn_here"), twin) == "ref"


def _identity_of(cls, inst, monkeypatch) -> Identity:
    ident = Identity()
    ident.static = {"id": "w", "node_id": "n", "job_id": "01"}
    ident._actor = {"actor_id": "a", "actor_class": cls.__name__, "actor_name": f"rlhf{cls.__name__}_0:1"}
    ident._class = cls
    fake = type("W", (), {"actors": {"a": inst}})()
    monkeypatch.setattr("raysleuth.agent.identity.ray_worker", lambda: fake)
    monkeypatch.setenv("RANK", "1")
    monkeypatch.delenv("WG_PREFIX", raising=False)
    return ident


def test_the_agent_reports_roles_worker_group_and_the_call_running(monkeypatch):
    cls = fused(ROLES)
    inst = cls()
    ident = _identity_of(cls, inst, monkeypatch)
    rep = ident.reported_roles()
    assert rep == {"worker_group": "rlhf", "roles": BOTH, "role": None}
    monkeypatch.setenv("WG_PREFIX", "ppo")
    seen = {}

    class Probe(CriticRole):
        def boom(self):
            return 1 / 0

        def update_critic(self):
            seen["report"] = ident.reported_roles()  # the agent thread would see this call
            current = ident.current()  # what a hit in this thread matches
            seen["current"] = dict(current, role=current.get("role"))
            return None

    probe_cls = fused({"actor": ActorRole, "critic": Probe})
    probe = probe_cls()
    ident = _identity_of(probe_cls, probe, monkeypatch)
    monkeypatch.setenv("WG_PREFIX", "ppo")
    probe._fuw_execute("critic_fwmn_update_critic")
    assert seen["report"]["role_call"] == {"role": "critic", "task": "Probe.update_critic"}
    assert seen["report"]["worker_group"] == "ppo" and seen["report"]["role"] == "critic"
    assert seen["current"]["role"] == "critic" and seen["current"]["rank"] == 1
    assert "role" not in dict(ident.current())  # found on the stack only when a scope asks
    assert ident.current()["role"] is None  # this thread runs no role's code
    try:
        probe._fuw_execute("critic_fwmn_boom")
    except ZeroDivisionError as exc:  # a crash record's identity names the role that raised
        tb = exc.__traceback__
        while tb.tb_next is not None:
            tb = tb.tb_next
        assert role_at(ident.current(), tb.tb_frame)["role"] == "critic"
    sent = pickle.loads(pickle.dumps(ident.current()))  # sent to the broker
    assert type(sent) is dict and sent["roles"][1] == {"name": "critic", "class_name": "Probe"}
    assert sent["worker_group"] == "ppo" and sent["role"] is None


def test_role_and_actor_scopes_match_roles_inside_colocated_and_fused_classes():
    role_actor, _ = split_condition("[role actor] x")
    actor_cls, _ = split_condition("[actor ActorRole] x")
    fused_w = {"actor_class": "FusedWorker_actor_critic", "roles": BOTH, "rank": 0}
    critic_only = {"actor_class": "WorkerDict", "roles": BOTH[1:], "rank": 0}
    plain = {"actor_class": "Learner", "rank": 0}
    for scope in (role_actor, actor_cls):
        assert scope.match(fused_w) is True  # arms the worker hosting it
        assert scope.match(critic_only) is False and scope.match(plain) is False
        # in a hit: the worker runs the critic's code now: not this time, but stays armed
        assert scope.match(dict(fused_w, role="critic")) is None
        assert scope.match(dict(fused_w, role="actor")) is True
    assert split_condition("[role ActorRole]")[0].match(fused_w) is True  # a role's class
    assert split_condition("[actor Learner]")[0].match(plain) is True  # unchanged
    by_group = split_condition("[role critic] [rank 1]")[0]
    assert by_group.match({"worker_group": "critic", "rank": 1, "roles": []}) is True
    assert by_group.match({"worker_group": "critic", "rank": 0, "roles": []}) is False
    assert by_group.match({"worker_group": "actor", "rank": 1, "roles": []}) is False


def _w(wid, group, rank, roles=(), job="01"):
    return Worker(wid, job_id=job, rank=rank, state="running", worker_group=group, roles=list(roles))


def test_a_worker_group_is_a_rank_group_and_group_critic_rank_2_is_the_critics_rank_2(tmp_path):
    workers = [_w(f"a{r}", "actor", r) for r in range(4)] + [_w(f"c{r}", "critic", r) for r in range(4)]
    workers.append(_w("f0", "ppo", 2, BOTH))
    book = GroupBook(tmp_path, lambda: workers)
    listed = {g["name"]: g for g in book.all()}
    assert listed["critic"]["workers"] == ["c0", "c1", "c2", "c3", "f0"]
    assert listed["critic"]["ranks"] == [0, 1, 2, 3] and listed["critic"]["worker_group"] == "critic"
    assert listed["ppo"]["workers"] == ["f0"] and "CriticRole" not in listed  # names, not classes
    scope, _ = split_condition("[group critic] [rank 2]")
    scope = scope._replace(group_defs=(book.definition("critic"),))
    hit = [w.id for w in workers if scope.match(w)]
    assert hit == ["c2", "f0"]
    assert scope.match({"worker_group": "actor", "rank": 2, "roles": []}) is False
    assert book.member_ids("critic") == ["c0", "c1", "c2", "c3", "f0"]
    assert book.definition("CriticRole")["worker_group"] == "CriticRole"  # a role's class too
    assert book.definition("nope") is None
    book.put("critic", {"ranks": [0]})  # the user's own group of that name wins
    assert book.definition("critic")["ranks"] == [0] and [g["name"] for g in book.all()].count("critic") == 1
    book.delete("critic")
    workers.clear()  # between two jobs: the name still stands for the worker group
    assert book.definition("critic")["worker_group"] == "critic"


def test_the_table_shows_the_roles_method_and_the_group_of_agentless_workers():
    state = StateSnapshot(
        workers=[{"worker_id": w, "pid": p, "node_id": "n", "is_alive": True, "worker_type": "WORKER"}
                 for w, p in (("wd", 1), ("fw", 2), ("cw", 3))],
        actors=[{"actor_id": "A1", "pid": 1, "node_id": "n", "state": "ALIVE", "class_name": "WorkerDict",
                 "name": "aB3xYzWorkerDict_0:0", "job_id": "01"},
                {"actor_id": "A2", "pid": 2, "node_id": "n", "state": "ALIVE",
                 "class_name": "FusedWorker_actor_critic", "name": "ppoFusedWorker_actor_critic_0:0",
                 "job_id": "01"},
                {"actor_id": "A3", "pid": 3, "node_id": "n", "state": "ALIVE", "class_name": "CriticWorker",
                 "name": "criticCriticWorker_0:1", "job_id": "01"}],
        tasks=[{"worker_id": "wd", "name": "WorkerDict.actor_update_actor"},
               {"worker_id": "fw", "name": "FusedWorker_actor_critic._fuw_execute"}],
        time=100.0,
    )  # fmt: skip
    reports = [
        {"id": "wd", "pid": 1, "node_id": "n", "roles": BOTH, "worker_group": "aB3xYz", "time": 100.0},
        {"id": "fw", "pid": 2, "node_id": "n", "roles": BOTH, "worker_group": "ppo", "time": 100.0,
         "role_call": {"role": "critic", "task": "CriticRole.update_critic"}},
    ]  # fmt: skip
    by_id = {w.id: w for w in merge_workers(reports, state, 100.0)}
    assert (by_id["wd"].task, by_id["wd"].role, by_id["wd"].worker_group) == (
        "ActorRole.update_actor",
        "actor",
        "aB3xYz",
    )
    assert (by_id["fw"].task, by_id["fw"].role) == ("CriticRole.update_critic", "critic")
    cw = by_id["cw"]  # no agent: the group from verl's actor name
    assert (cw.worker_group, cw.roles, cw.role, cw.agent) == ("critic", [], None, False)
    assert by_id["wd"].to_json()["roles"] == BOTH


def test_verls_own_classes_when_verl_is_installed():
    base = pytest.importorskip("verl.single_controller.ray.base")
    from verl.single_controller.base import Worker as VerlWorker
    from verl.single_controller.base.decorator import Dispatch
    from verl.single_controller.base.decorator import register as verl_register

    class Actor(VerlWorker):
        @verl_register(dispatch_mode=Dispatch.ONE_TO_ALL)
        def update_actor(self):
            return None

    class Critic(VerlWorker):
        @verl_register(dispatch_mode=Dispatch.ONE_TO_ALL)
        def boom(self):
            return 1 / 0

        def update_critic(self):
            return None

    import ray

    class_dict = {
        "actor": base.RayClassWithInitArgs(ray.remote(Actor)),
        "critic": base.RayClassWithInitArgs(ray.remote(Critic)),
    }
    fused_cls = base.create_colocated_worker_raw_cls(class_dict)
    assert fused_cls.__name__ == "FusedWorker_actor_critic"
    assert roles_of(fused_cls) == [
        {"name": "actor", "class_name": "Actor"},
        {"name": "critic", "class_name": "Critic"},
    ]
    worker_dict = base.create_colocated_worker_cls(class_dict).cls.__ray_actor_class__
    assert [r["name"] for r in roles_of(worker_dict)] == ["actor", "critic"]


def test_raysleuth_list_shows_the_roles_and_the_roles_method():
    from raysleuth.cli.table import format_workers

    w = Worker("f" * 16, pid=7, node_ip="10.0.0.1", node_id="n", actor_class="WorkerDict", rank=2,
               agent=True, roles=BOTH, role="actor", task="ActorRolloutRefWorker.update_actor")  # fmt: skip
    row = format_workers([w.to_json()]).splitlines()[1]
    assert "actor,critic (WorkerDict)" in row and "ActorRolloutRefWorker.update_actor" in row


def test_the_code_lens_of_a_role_class_counts_the_workers_hosting_it():
    from raysleuth.lsp.remotes import RemoteDef
    from raysleuth.lsp.render import matches

    span = ((0, 0), (0, 1))
    critic = RemoteDef("CriticRole", "actor", span, span, "decorator")  # type: ignore[arg-type]
    assert matches(critic, Worker("f", actor_class="FusedWorker_actor_critic", roles=BOTH))
    assert not matches(critic, Worker("g", actor_class="WorkerDict", roles=BOTH[:1]))
    assert matches(critic, Worker("h", actor_class="CriticRole"))
