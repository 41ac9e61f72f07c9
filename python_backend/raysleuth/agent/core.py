"""The worker agent: a daemon thread inside a Ray worker that registers it and heartbeats.

Runs inside Ray workers: it never blocks the task thread, never writes to stdout/stderr, never
raises into user code, imports no debugger and starts no tracing while idle.
"""

from __future__ import annotations

import atexit
import collections
import os
import sys
import threading
import time

from raysleuth import names
from raysleuth.agent import rank as rank_mod

HEARTBEAT_S = float(os.environ.get("RAYSLEUTH_HEARTBEAT_S", "2.0"))
"""Seconds between heartbeats to the registry."""

LOOKUP_RETRY_S = float(os.environ.get("RAYSLEUTH_LOOKUP_RETRY_S", "3.0"))
"""Seconds between looks for the registry actor while no broker runs."""

EARLY_S = 10.0
EARLY_HEARTBEAT_S = 0.5
"""For EARLY_S after start-up, while no actor identity is known yet, report this often."""

CONNECT_TIMEOUT_S = 300.0
"""How long an agent started before Ray connects waits for the connection."""

CALL_TIMEOUT_S = 10.0
"""Longest wait for one call to the registry; only the agent thread waits."""


def _ray_worker():
    mod = sys.modules.get("ray._private.worker")
    return getattr(mod, "global_worker", None) if mod else None


def ray_connected() -> bool:
    w = _ray_worker()
    return bool(w is not None and getattr(w, "connected", False))


class Agent:
    """One per process. `str(agent)` says who it is: `Agent[node=3f2a pid=4242 rank=3]`."""

    def __init__(self, source: str) -> None:
        self.source = source
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._registry = None
        self._next_lookup = 0.0
        self._static: dict | None = None
        self._actor: dict | None = None
        self.events: collections.deque = collections.deque(maxlen=200)
        """Last `raysleuth.event()` records of this worker, newest last."""
        self.disabled = False
        self._started = time.monotonic()

    @property
    def log(self):
        # Configured on first use, in the agent thread: at .pth time Ray is not imported yet,
        # and the hook must not import it early on the worker's main thread.
        from raysleuth.agent.log import agent_logger

        return agent_logger()

    def __str__(self) -> str:
        s = self._static or {}
        r = rank_mod.resolve_rank().rank
        return f"Agent[node={str(s.get('node_id', '?'))[:4]} pid={os.getpid()} rank={r}]"

    # --- life cycle -------------------------------------------------------------------------

    def start(self, wait_for_connect: bool) -> None:
        self._thread = threading.Thread(
            target=self._run, args=(wait_for_connect,), name="raysleuth-agent", daemon=True
        )
        self._thread.start()

    def poke(self) -> None:
        """Send a report now instead of at the next heartbeat (rank or state changed).

        Called from the user's thread: only submits the call (about a millisecond), never waits.
        """
        registry = self._registry
        if registry is None or self._static is None:
            self._wake.set()
            return
        try:
            registry.report.remote(self.report())
        except Exception:  # noqa: BLE001
            self.log.exception("poke failed")

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def _run(self, wait_for_connect: bool) -> None:
        try:
            if wait_for_connect and not self._wait_connected():
                return
            if not self._identify():
                return
            atexit.register(self._goodbye)
            self.log.info("%s started (%s)", self, self.source)
            self._loop()
        except Exception:  # noqa: BLE001 - the agent must never take the worker down
            self.log.exception("agent thread failed; the worker runs on without it")

    def _wait_connected(self) -> bool:
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        while not ray_connected():
            if time.monotonic() > deadline or self._stop.is_set():
                self.log.warning("Ray never connected in pid %s; agent not started", os.getpid())
                return False
            # Ray connects in this process's main thread a few hundred ms after start-up.
            time.sleep(0.05)
        return True

    # --- identity ---------------------------------------------------------------------------

    def _identify(self) -> bool:
        import ray

        ctx = ray.get_runtime_context()
        w = _ray_worker()
        self._static = {
            "id": ctx.get_worker_id(),
            "pid": os.getpid(),
            "node_id": ctx.get_node_id(),
            "node_ip": getattr(w, "node_ip_address", None),
            "job_id": ctx.get_job_id(),
            "python": ".".join(map(str, sys.version_info[:3])),
            "driver": getattr(w, "mode", None) == 0,  # SCRIPT_MODE: a driver ran raysleuth.init()
        }
        if not self._static["driver"]:
            from raysleuth.agent import breakpoint as bp

            bp.install()
        return True

    def _actor_identity(self) -> dict:
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
            cls = ctx.current_actor._ray_actor_creation_function_descriptor.class_name
        except Exception:  # noqa: BLE001 - private attribute; the broker fills it from Ray
            pass
        actor = {"actor_id": actor_id, "actor_class": cls, "actor_name": ctx.get_actor_name() or None}
        if cls in names.OWN_ACTOR_CLASSES:
            self.disabled = True
        if cls is not None:
            self._actor = actor
        return actor

    def report(self) -> dict:
        """What the registry learns about this worker now."""
        import ray

        info = dict(self._static or {})
        info.update(self._actor_identity())
        r = rank_mod.resolve_rank()
        info.update(rank=r.rank, local_rank=r.local_rank, world_size=r.world_size, rank_source=r.source)
        try:
            info["gpu_ids"] = [str(g) for g in ray.get_runtime_context().get_accelerator_ids().get("GPU", [])]
        except Exception:  # noqa: BLE001
            info["gpu_ids"] = []
        info["state"] = "running"
        bp = sys.modules.get("raysleuth.agent.breakpoint")
        if bp is not None and bp.paused_at is not None:
            info["state"] = "paused"
            info["paused_at"] = dict(bp.paused_at)
        info["agent_source"] = self.source
        try:
            info["cwd"] = os.getcwd()  # a runtime_env working_dir is unpacked here: for path mapping
        except OSError:
            info["cwd"] = None
        info["time"] = time.time()
        return info

    # --- talking to the registry ------------------------------------------------------------

    def _lookup(self):
        if self._registry is not None:
            return self._registry
        now = time.monotonic()
        if now < self._next_lookup:
            return None
        self._next_lookup = now + LOOKUP_RETRY_S
        import ray

        try:
            self._registry = ray.get_actor(names.REGISTRY_ACTOR, namespace=names.NAMESPACE)
            self.log.info("%s found the registry", self)
        except ValueError:
            pass  # no broker runs now: look again later
        except Exception:  # noqa: BLE001
            self.log.exception("looking up the registry failed")
        return self._registry

    def _call(self, method: str, *args):
        import ray

        registry = self._lookup()
        if registry is None:
            return None
        try:
            timeout = CALL_TIMEOUT_S + (args[-1] if method == "heartbeat" else 0)
            return ray.get(getattr(registry, method).remote(*args), timeout=timeout)
        except Exception as exc:  # noqa: BLE001 - the broker went away or is slow: look again
            self.log.info("registry call %s failed (%s); looking it up again", method, type(exc).__name__)
            self._registry = None
            self._next_lookup = 0.0
            return None

    def _loop(self) -> None:
        while not self._stop.is_set():
            info = self.report()
            if self.disabled:
                self.log.info("%s is one of Ray Sleuth's own actors; agent stops", self)
                return
            if self._actor is None and time.monotonic() - self._started < EARLY_S:
                wait = EARLY_HEARTBEAT_S  # an actor's identity arrives just after start-up
            else:
                wait = HEARTBEAT_S
            # One call is both the heartbeat and a long poll for commands.
            commands = self._call("heartbeat", info, wait)
            if commands is None:
                self._wake.wait(LOOKUP_RETRY_S)
                self._wake.clear()
                continue
            for command in commands:
                self._run_command(command)

    def _run_command(self, command: dict) -> None:
        from raysleuth.agent import commands

        try:
            result = commands.run(self, command)
        except Exception as exc:  # noqa: BLE001 - a failed command must not end the agent
            self.log.exception("command %s failed", command.get("op"))
            result = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        self._call("command_result", command["id"], result)

    def _goodbye(self) -> None:
        if self._registry is None or self._static is None or self.disabled:
            return
        try:
            import ray

            ray.get(self._registry.goodbye.remote(self._static["id"], "exit"), timeout=1.0)
        except Exception:  # noqa: BLE001 - at exit Ray may be gone already
            pass
