"""Who this worker is: Ray's ids of the process, node and job, the actor it hosts, its rank.

Runs inside Ray workers: reads Ray's runtime context only after Ray connected, never builds an
actor handle (that loads the class a second time) and never raises into the caller.
"""

from __future__ import annotations

import os
import sys

from raysleuth.agent import rank as rank_mod
from raysleuth.agent.log import new_log_file, swallow
from raysleuth.model import roles as roles_mod
from raysleuth.shared import names

_fault_log = None
"""Our own faulthandler file, where Ray left faulthandler off."""


def ray_worker():
    """Ray's `global_worker`, if Ray is imported (never imports it)."""
    mod = sys.modules.get("ray._private.worker")
    return getattr(mod, "global_worker", None) if mod else None


def ray_connected() -> bool:
    w = ray_worker()
    return bool(w is not None and getattr(w, "connected", False))


def fault_file() -> str | None:
    """Where a fatal error's faulthandler text goes: Ray's .err log of this worker (its stderr),
    or, where faulthandler is off, a `raysleuth-fault-<pid>.log` next to the agent's log."""
    global _fault_log
    try:
        import faulthandler

        if not faulthandler.is_enabled():
            path, fd = new_log_file("fault")  # exclusive, 0600: never a file someone planted
            _fault_log = os.fdopen(fd, "a")  # stays open for the life of the process
            faulthandler.enable(_fault_log, all_threads=True)
            return path
        path = os.readlink(f"/proc/{os.getpid()}/fd/2")
        return path if path.startswith("/") else None
    except (OSError, ValueError, RuntimeError):
        return None


class Identity:
    """This worker's identity: fixed ids once Ray connected, the actor once its creation task runs,
    the rank as known now."""

    def __init__(self) -> None:
        self.static: dict | None = None
        """{id, pid, node_id, node_ip, job_id, python, driver[, fault_file]} once read."""
        self._actor: dict | None = None
        """{actor_id, actor_class, actor_name} once the actor's class is known (then fixed)."""
        self.own_actor = False
        """This process hosts one of Ray Sleuth's own actors: the agent stays out of it."""
        self._class: type | None = None
        """The actor's class object, once known (its roles are read from it)."""
        self._roles: list[dict] | None = None
        """The roles it hosts (model/roles.py), once every role's class is known."""

    @property
    def worker_id(self) -> str | None:
        return self.static["id"] if self.static is not None else None

    def read(self) -> dict:
        """Read the fixed ids from Ray's runtime context (Ray must be connected)."""
        import ray

        ctx = ray.get_runtime_context()
        w = ray_worker()
        self.static = {
            "id": ctx.get_worker_id(),
            "pid": os.getpid(),
            "node_id": ctx.get_node_id(),
            "node_ip": getattr(w, "node_ip_address", None),
            "job_id": ctx.get_job_id(),
            "python": ".".join(map(str, sys.version_info[:3])),
            "driver": getattr(w, "mode", None) == 0,  # SCRIPT_MODE: a driver ran raysleuth.init()
        }
        return self.static

    def job_id(self) -> str | None:
        """The job this worker runs for. A worker Ray started before a job claimed it (a
        prestarted one) reads the nil job id at connect: ask again until a real one shows."""
        job = (self.static or {}).get("job_id")
        if job and not _nil(job):
            return job
        if self.static is None:
            return None
        try:
            import ray

            job = ray.get_runtime_context().get_job_id()
        except Exception:  # noqa: BLE001 - the broker takes the job from Ray's State API then
            swallow("reading the worker's job id")
            return None
        if not job or _nil(job):
            return None  # never report the nil id: the broker would take it over Ray's
        self.static["job_id"] = job
        return job

    @property
    def actor_known(self) -> bool:
        return self._actor is not None

    def actor(self) -> dict:
        """Actor id/class/name; known only once the actor's creation task runs, then fixed."""
        if self._actor is not None:
            return self._actor
        import ray

        ctx = ray.get_runtime_context()
        actor_id = ctx.get_actor_id()
        if not actor_id:
            return {"actor_id": None, "actor_class": None, "actor_name": None}
        cls = None
        try:
            # The instance Ray created for this actor (before its __init__ ran). Not
            # ctx.current_actor: building a handle loads the class again, in this thread, and
            # the copy it makes is not the one the actor runs.
            for inst in list(getattr(ray_worker(), "actors", {}).values()):
                kind = type(inst)
                cls = getattr(kind, "__ray_actor_class__", kind).__name__
                self._class = kind
        except Exception:  # noqa: BLE001 - private attribute; the broker fills it from Ray
            swallow("reading the actor's class from Ray's worker")
        if cls is None:
            # The creation task has not started: Ray's core worker may not hold this actor's
            # handle yet, and asking for its name then aborts the process (a RAY_CHECK in
            # ActorManager::GetActorHandle, seen as a worker dying with SYSTEM_ERROR at start).
            return {"actor_id": actor_id, "actor_class": None, "actor_name": None}
        actor = {"actor_id": actor_id, "actor_class": cls, "actor_name": ctx.get_actor_name() or None}
        if cls in names.OWN_ACTOR_CLASSES:
            self.own_actor = True
        self._actor = actor
        return actor

    def roles(self) -> list[dict]:
        """The verl roles this actor hosts ([] for an ordinary actor): names from its class,
        each role's class once the actor's `__init__` made it (read again until all are known)."""
        if self._roles is not None:
            return self._roles
        if self._class is None:
            return []
        inst = next(
            (i for i in list(getattr(ray_worker(), "actors", {}).values()) if type(i) is self._class), None
        )
        found = roles_mod.roles_of(self._class, inst)
        if not found or roles_mod.complete(found):
            self._roles = found
        return found

    def worker_group(self) -> str | None:
        """verl's worker group: its `WG_PREFIX`, else the prefix of its actor's name."""
        actor = self._actor or {}
        return roles_mod.worker_group_of(
            actor.get("actor_class"), actor.get("actor_name"), os.environ.get(roles_mod.PREFIX_ENV)
        )

    def role_info(self) -> dict:
        """{worker_group, roles, role}: `role` is the only role it hosts, else None."""
        hosted = self.roles()
        role = hosted[0]["name"] if len(hosted) == 1 else None
        return {"worker_group": self.worker_group(), "roles": hosted, "role": role}

    def running_call(self) -> dict | None:
        """The role call some thread of a worker hosting roles runs now: {role, task}. The thread
        asking counts too: a pause's report is sent from the paused thread itself."""
        hosted = self.roles()
        if not hosted:
            return None
        try:
            for frame in list(sys._current_frames().values()):
                call = roles_mod.call_in(frame, hosted)
                if call is not None:
                    return call
        except Exception:  # noqa: BLE001 - the report goes on without it
            swallow("reading the role call running now")
        return None

    def reported_roles(self) -> dict:
        """What a report says of roles: {worker_group, roles, role[, role_call]}."""
        info = self.role_info()
        call = self.running_call()
        if call is not None:
            info["role_call"] = call
            info["role"] = call["role"]
        return info

    def current(self) -> dict:
        """What a rank scope is matched against: node, actor, roles and the rank as known now.
        In a worker hosting several roles, `role` is the role whose code runs in the thread that
        asks for it (a hit's), looked up on its stack only when a scope asks."""
        info: dict = dict(self.static or {})
        info.update(self.actor())
        info.update(self.role_info())
        if len(info["roles"]) > 1:
            del info["role"]
            info = _RoleOnAsk(info)
        info["rank"] = rank_mod.resolve_rank().rank
        if self.static is not None:
            # A worker Ray started before a job claimed it read the nil job id at connect: its
            # job is known once a task of that job runs (`[group job-<id>]` scopes need it).
            info["job_id"] = self.job_id()
        return info

    def __str__(self) -> str:
        s = self.static or {}
        r = rank_mod.resolve_rank().rank
        return f"Agent[node={str(s.get('node_id', '?'))[:4]} pid={os.getpid()} rank={r}]"


class _RoleOnAsk(dict):
    """An identity whose `role` is found on the asking thread's stack when first asked for (only
    role scopes ask; a `[rank 2]` hit pays nothing for it). Keeps no frame."""

    def get(self, key, default=None):
        if key == "role" and not dict.__contains__(self, "role"):
            self["role"] = self._role_here(sys._getframe(1))
        return dict.get(self, key, default)

    def __missing__(self, key):
        if key != "role":
            raise KeyError(key)
        role = self["role"] = self._role_here(sys._getframe(1))
        return role

    def __reduce__(self):
        # Sent as a plain dict (a crash record's identity): the broker never imports the agent.
        return dict, (dict(self, role=self.get("role")),)

    def _role_here(self, frame) -> str | None:
        try:
            return roles_mod.role_in(frame, self["roles"])
        except Exception:  # noqa: BLE001 - a frame we cannot read: not known
            swallow("finding the role running now")
            return None


def role_at(identity: dict, frame) -> dict:
    """`identity` with `role` the role whose code runs in `frame`'s stack (a crash's innermost
    frame), in a worker hosting several roles."""
    if isinstance(identity, _RoleOnAsk) and frame is not None:
        identity["role"] = identity._role_here(frame)
    return identity


def _nil(job_id: str) -> bool:
    """Ray's nil job id (`ffffffff`): no job yet."""
    return set(job_id.lower()) == {"f"}
