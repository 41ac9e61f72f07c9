"""The worker table: agent reports merged with Ray's State API into the contract's worker objects.

Pure functions of their inputs (reports, State API snapshot, clock): no Ray, no I/O, so the
rules are unit-tested directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from raysleuth.model.roles import user_task, worker_group_of
from raysleuth.model.worker import FIELDS, Worker
from raysleuth.shared import names

STALE_AFTER_S = 15.0
"""An agent silent this long, and unknown to the State API, is taken to have exited."""

KEEP_EXITED_S = 600.0
"""Exited workers stay in the table this long, so a user sees what ended."""

MAX_EXITED = 200
"""At most this many exited workers are kept (newest first)."""

WORKER_FIELDS = FIELDS
"""The worker object's fields, in order (raysleuth.model.worker.Worker)."""

REPORTED = (
    "pid", "node_id", "node_ip", "job_id", "actor_id", "actor_class", "actor_name", "rank",
    "local_rank", "world_size", "gpu_ids", "python", "cwd", "armed", "deadlines", "worker_group", "roles",
)  # fmt: skip
"""What an agent's report says of its worker, taken over as it is."""


@dataclass
class StateSnapshot:
    """One poll of Ray's State API (the dashboard's /api/v0 endpoints)."""

    workers: list[dict] = field(default_factory=list)
    actors: list[dict] = field(default_factory=list)
    tasks: list[dict] = field(default_factory=list)
    """Only tasks in state RUNNING."""
    nodes: list[dict] = field(default_factory=list)
    time: float = 0.0


NODE_DIED = "NODE_DIED"
"""The exit type `settle_dead_nodes` gives a worker whose node died under it."""


def settle_dead_nodes(snap: StateSnapshot) -> StateSnapshot:
    """The snapshot with every worker on a DEAD node marked dead too. Ray's worker list keeps
    such a worker `is_alive` (the raylet that would report its end is gone with the node:
    `Cluster.remove_node`, a preempted or lost machine), so it would stay live, or paused, here
    for good; as a death it gets its record (exit type NODE_DIED) like any other."""
    dead = {n.get("node_id"): n for n in snap.nodes if n.get("state") == "DEAD"}
    if not dead:
        return snap
    workers = []
    for sw in snap.workers:
        node = dead.get(sw.get("node_id"))
        if node is not None and sw.get("is_alive"):
            why = (node.get("state_message") or "").strip() or "its raylet is gone"
            sw = dict(
                sw,
                is_alive=False,
                num_paused_threads=None,
                exit_type=NODE_DIED,
                exit_detail=f"the worker's node {sw['node_id'][:8]} died ({why}): the process went with it",
                end_time_ms=node.get("end_time_ms") or int(snap.time * 1000),
            )
        workers.append(sw)
    return StateSnapshot(workers, snap.actors, snap.tasks, snap.nodes, snap.time)


def _own_actor(actor: dict) -> bool:
    return actor.get("class_name") in names.OWN_ACTOR_CLASSES and (
        actor.get("ray_namespace") in (None, names.NAMESPACE)
    )


def merge_workers(reports: list[dict], state: StateSnapshot | None, now: float) -> list[Worker]:
    """Workers in the contract's shape: live ones first (by node, rank, pid), then exited ones."""
    table: dict[str, Worker] = {}
    # By (node, pid), live and dead apart: pids are reused, and a dead actor's old pid may be a
    # live worker's now (and the other way round).
    own_pids: set[tuple] = set()
    own_dead_pids: set[tuple] = set()
    actor_by_pid: dict[tuple, dict] = {}
    dead_actor_by_pid: dict[tuple, dict] = {}
    task_by_worker: dict[str, dict] = {}
    if state is not None:
        for actor in state.actors:
            key = (actor.get("node_id"), actor.get("pid"))
            if _own_actor(actor):
                (own_dead_pids if actor.get("state") == "DEAD" else own_pids).add(key)
            elif actor.get("state") == "DEAD":
                dead_actor_by_pid[key] = actor
            elif actor.get("state") == "ALIVE" or key not in actor_by_pid:
                actor_by_pid[key] = actor
        for task in state.tasks:
            if task.get("worker_id"):
                task_by_worker[task["worker_id"]] = task
        for sw in state.workers:
            if sw.get("worker_type") not in (None, "WORKER"):
                continue
            key = (sw.get("node_id"), sw.get("pid"))
            alive = bool(sw.get("is_alive"))
            if key in own_pids or (not alive and key in own_dead_pids):
                continue
            w = Worker(sw["worker_id"], pid=sw.get("pid"), node_id=sw.get("node_id"), node_ip=sw.get("ip"))
            its_actor = actor_by_pid.get(key)
            if not alive:
                its_actor = dead_actor_by_pid.get(key) or its_actor
            if its_actor is not None:
                w.actor_id = its_actor.get("actor_id")
                w.actor_class = its_actor.get("class_name")
                w.actor_name = its_actor.get("name") or None
                w.job_id = its_actor.get("job_id")
            its_task = task_by_worker.get(sw["worker_id"])
            if its_task is not None and alive:
                w.task = its_task.get("name") or its_task.get("func_or_class_name")
                w.job_id = w.job_id or its_task.get("job_id")
            if not alive:
                w.state = "exited"
                end = sw.get("end_time_ms") or 0
                w.last_seen = end / 1000.0 if end else None
            else:
                w.state = "running" if w.task else "idle"
                w.last_seen = state.time
                if sw.get("num_paused_threads"):
                    w.state = "paused"
            table[w.id] = w

    # A snapshot older than STALE_AFTER_S (Ray's dashboard is down) no longer vouches that a
    # worker lives: an agent that went silent meanwhile turns `exited` as it would without one.
    vouches = state is not None and now - state.time <= STALE_AFTER_S
    calls: dict[str, dict] = {}
    for rep in reports:
        wid = rep.get("id")
        if not wid:
            continue
        own = (rep.get("node_id"), rep.get("pid")) in own_pids
        if own or rep.get("actor_class") in names.OWN_ACTOR_CLASSES:
            continue
        w = table.get(wid) or Worker(wid)
        known_to_ray = wid in table and vouches
        for name in REPORTED:
            if rep.get(name) is not None:
                setattr(w, name, rep[name])
        w.agent = True
        if isinstance(rep.get("role_call"), dict):
            calls[wid] = rep["role_call"]
        received = rep.get("received") or rep.get("time")
        w.last_seen = max(filter(None, [w.last_seen, received]), default=None)
        if rep.get("goodbye"):
            w.state = "exited"
        elif not known_to_ray and received is not None and now - received > STALE_AFTER_S:
            w.state = "exited"
        elif w.state != "exited":
            if rep.get("state") in ("paused", "crashed"):
                w.state = rep["state"]
                w.paused_at = rep.get("paused_at")
                if rep["state"] == "crashed":
                    w.crash = rep.get("crash")
                    w.held_until = rep.get("held_until")
            elif not known_to_ray:
                w.state = "running" if w.task else "idle"
        table[wid] = w

    for w in table.values():
        _name_roles(w, calls.get(w.id))
    live = [w for w in table.values() if w.state != "exited"]
    exited = [
        w
        for w in table.values()
        if w.state == "exited" and (w.last_seen is None or now - w.last_seen <= KEEP_EXITED_S)
    ]
    live.sort(key=lambda w: (w.node_id or "", _rank_key(w.rank), w.pid or 0))
    exited.sort(key=lambda w: -(w.last_seen or 0))
    return live + exited[:MAX_EXITED]


def _name_roles(w: Worker, call: dict | None) -> None:
    """verl's names made readable (model/roles.py): the worker group from the actor's name where
    its agent did not say, the task as the role's own method, the role running it."""
    if w.worker_group is None:
        w.worker_group = worker_group_of(w.actor_class, w.actor_name)
    if not w.roles:
        return
    w.task, role = user_task(w.task, w.roles, call if w.state != "exited" else None)
    w.role = role or (w.roles[0].get("name") if len(w.roles) == 1 else None)


def _rank_key(rank) -> tuple:
    return (0, rank) if isinstance(rank, int) else (1, 0)


def merge_nodes(state: StateSnapshot | None, workers: list[Worker]) -> list[dict]:
    """Nodes in the contract's shape, with the number of live workers on each."""
    counts: dict[str, int] = {}
    for w in workers:
        if w.state != "exited" and w.node_id:
            counts[w.node_id] = counts.get(w.node_id, 0) + 1
    nodes: dict[str, dict] = {}
    for n in state.nodes if state else []:
        nodes[n["node_id"]] = {
            "node_id": n["node_id"],
            "node_ip": n.get("node_ip"),
            "alive": n.get("state") == "ALIVE",
            "workers": counts.get(n["node_id"], 0),
            "head": bool(n.get("is_head_node")),
        }
    for w in workers:  # nodes known only through agents (no State API)
        nid = w.node_id
        if nid and nid not in nodes:
            nodes[nid] = {
                "node_id": nid,
                "node_ip": w.node_ip,
                "alive": True,
                "workers": counts.get(nid, 0),
                "head": False,
            }
    return sorted(nodes.values(), key=lambda n: (not n["head"], n["node_ip"] or "", n["node_id"]))


def comparable(workers: list[dict]) -> list[dict]:
    """The table (its JSON objects) without timestamps, to tell whether a change is worth an event."""
    return [dict(w, last_seen=None) for w in workers]
