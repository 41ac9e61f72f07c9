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
EVENT_BATCH_MAX = 5000
"""`raysleuth.event()` records kept for the next heartbeat at most (older ones are dropped, counted)."""
"""For EARLY_S after start-up, while no actor identity is known yet, report this often."""

CONNECT_TIMEOUT_S = 300.0
"""How long an agent started before Ray connects waits for the connection."""

CALL_TIMEOUT_S = 10.0
"""Longest wait for one call to the registry; only the agent thread waits."""


def _ray_worker():
    mod = sys.modules.get("ray._private.worker")
    return getattr(mod, "global_worker", None) if mod else None


def _points_from_kv() -> dict | None:
    """The point set the broker left in Ray's internal KV, or None (no broker, or unreadable)."""
    try:
        import json

        from ray.experimental import internal_kv

        raw = internal_kv._internal_kv_get(names.POINTS_KV_KEY, namespace=names.NAMESPACE)
        return json.loads(raw) if raw else None
    except Exception:  # noqa: BLE001
        return None


_fault_log = None
"""Our own faulthandler file, where Ray left faulthandler off."""


def _fault_file() -> str | None:
    """Where a fatal error's faulthandler text goes: Ray's .err log of this worker (its stderr),
    or, where faulthandler is off, a `raysleuth-fault-<pid>.log` next to the agent's log."""
    global _fault_log
    try:
        import faulthandler

        if not faulthandler.is_enabled():
            from raysleuth.paths import ray_log_dir as _log_dir

            path = os.path.join(_log_dir(), f"raysleuth-fault-{os.getpid()}.log")
            _fault_log = open(path, "a")  # noqa: SIM115 - stays open for the life of the process
            faulthandler.enable(_fault_log, all_threads=True)
            return path
        path = os.readlink(f"/proc/{os.getpid()}/fd/2")
        return path if path.startswith("/") else None
    except (OSError, ValueError, RuntimeError):
        return None


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
        self.points: list[dict] = []
        """The cluster's breakpoints, logpoints and snapshot points (specs from the registry)."""
        self.bp_version = ""
        self.trigger = None
        """The light trigger (agent/trigger.py), created when the first point arrives."""
        self._arm_key: tuple | None = None
        self._rearm = False
        self._synced = threading.Event()
        """Set once the first heartbeat was answered (or no broker runs): code Ray loads after
        that is armed before it runs."""
        self.emit_dropped = 0
        self._arm_lock = threading.RLock()
        self._pending_emits: collections.deque = collections.deque(maxlen=500)
        self._emit_lock = threading.Lock()
        self._emit_n = 0
        self._event_batch: collections.deque = collections.deque(maxlen=EVENT_BATCH_MAX)
        """`raysleuth.event()` records not sent to the broker yet (sent with the heartbeat)."""
        self.events_dropped = 0

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
        if self.source != "api":
            # In this thread, now: Ray's main thread must not load a class before the wrap.
            from raysleuth.agent import loadhook

            loadhook.install_early(self)
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

    def record_event(self, record: dict) -> None:
        """From the user's thread: an append, no call (the agent thread sends them in batches)."""
        self.events.append(record)
        if self.disabled:
            return
        if len(self._event_batch) == self._event_batch.maxlen:
            self.events_dropped += 1
        self._event_batch.append(record)

    def _flush_events(self) -> None:
        if not self._event_batch or self._registry is None or self._static is None:
            return
        batch = []
        while self._event_batch and len(batch) < EVENT_BATCH_MAX:
            batch.append(self._event_batch.popleft())
        dropped, self.events_dropped = self.events_dropped, 0
        self.emit("events", {"items": batch, "dropped": dropped})

    def emit(self, kind: str, payload: dict) -> None:
        """Send a logpoint line or a snapshot to the broker. From the user's thread: never waits."""
        with self._emit_lock:  # numbered so the registry can keep one worker's items in order
            n = self._emit_n
            self._emit_n += 1
        payload = dict(payload, rank=rank_mod.resolve_rank().rank, pid=os.getpid(), n=n)
        registry = self._registry
        if registry is None or self._static is None:
            # Armed from Ray's KV before the agent thread found the registry: send them then.
            if len(self._pending_emits) == self._pending_emits.maxlen:
                self.emit_dropped += 1
            self._pending_emits.append((kind, payload))
            self._next_lookup = 0.0  # look for the registry now, not at the next retry
            self._wake.set()
            return
        try:
            registry.emit.remote(self._static["id"], kind, payload)
        except Exception:  # noqa: BLE001
            self.emit_dropped += 1

    def report_crash(self, record: dict) -> dict | None:
        """Send a crash record to the broker from the failing task's thread: {id, hold, watched}.

        Waits for the answer (a few ms; at most CRASH_CALL_TIMEOUT_S): the hold depends on it.
        Without a broker the record waits with the logpoint lines for one to appear.
        """
        import ray

        from raysleuth.agent.postmortem import CRASH_CALL_TIMEOUT_S

        if self._static is None:
            return None
        registry = self._registry
        if registry is None:
            self._next_lookup = 0.0
            registry = self._lookup()
        if registry is not None:
            try:
                return ray.get(
                    registry.crash.remote(self._static["id"], record), timeout=CRASH_CALL_TIMEOUT_S
                )
            except Exception as exc:  # noqa: BLE001
                self.log.info(
                    "sending a crash record failed (%s); it waits for the broker", type(exc).__name__
                )
        self.emit("crash", record)
        return None

    def _flush_emits(self) -> None:
        while self._pending_emits and self._registry is not None:
            kind, payload = self._pending_emits.popleft()
            try:
                self._registry.emit.remote(self._static["id"], kind, payload)
            except Exception:  # noqa: BLE001
                self.emit_dropped += 1

    def rearm_soon(self) -> None:
        """A point ruled itself out (rank known now): arm again at the next heartbeat."""
        self._rearm = True

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def _run(self, wait_for_connect: bool) -> None:
        me = threading.current_thread()
        me.pydev_do_not_trace = True  # debugpy must never trace or suspend the agent thread
        me.is_pydev_daemon_thread = True  # nor list it among the program's threads
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
        finally:
            self._synced.set()  # nothing may wait for an agent that is gone

    def _wait_connected(self) -> bool:
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        while not ray_connected():
            if "ray._private.function_manager" in sys.modules:
                self._install_loadhook()  # before the first class loads, if we can
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
            self._install_loadhook()
            from raysleuth.agent import postmortem

            postmortem.install(self)
            self._static["fault_file"] = _fault_file()
        return True

    def _install_loadhook(self) -> None:
        if self.source == "api":
            return  # raysleuth.init() in a driver: it runs no remote code
        from raysleuth.agent import loadhook

        loadhook.install(self)

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
            # The instance Ray created for this actor (before its __init__ ran). Not
            # ctx.current_actor: building a handle loads the class again, in this thread, and
            # the copy it makes is not the one the actor runs.
            for inst in list(getattr(_ray_worker(), "actors", {}).values()):
                kind = type(inst)
                cls = getattr(kind, "__ray_actor_class__", kind).__name__
        except Exception:  # noqa: BLE001 - private attribute; the broker fills it from Ray
            pass
        if cls is None:
            # The creation task has not started: Ray's core worker may not hold this actor's
            # handle yet, and asking for its name then aborts the process (a RAY_CHECK in
            # ActorManager::GetActorHandle, seen as a worker dying with SYSTEM_ERROR at start).
            return {"actor_id": actor_id, "actor_class": None, "actor_name": None}
        actor = {"actor_id": actor_id, "actor_class": cls, "actor_name": ctx.get_actor_name() or None}
        if cls in names.OWN_ACTOR_CLASSES:
            self.disabled = True
        if cls is not None:
            self._actor = actor
        return actor

    def identity(self) -> dict:
        """What a rank scope is matched against: node, actor and the rank as known now."""
        info = dict(self._static or {})
        info.update(self._actor_identity())
        info["rank"] = rank_mod.resolve_rank().rank
        return info

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
        pm = sys.modules.get("raysleuth.agent.postmortem")
        if pm is not None and pm.crashed is not None:
            c = pm.crashed
            info["state"] = "crashed"
            info["paused_at"] = {"path": c["path"], "line": c["line"], "reason": "exception"}
            info["crash"] = c["crash"]
            info["held_until"] = c["held_until"]
        info["agent_source"] = self.source
        info["bp_version"] = self.bp_version
        t = self.trigger
        info["armed"] = sorted(t.armed) if t is not None else []
        if t is not None and t.backend is not None:
            info["trigger"] = t.backend.name
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
        from raysleuth.agent import gpu

        while not self._stop.is_set():
            info = self.report()
            if not info.get("driver"):
                info["gpu"] = gpu.sample()  # the last one is kept for a worker that dies
            if self.disabled:
                self.log.info("%s is one of Ray Sleuth's own actors; agent stops", self)
                return
            if not self._synced.is_set():
                wait = 0.0  # the first heartbeat answers at once: Ray's first load waits for it
            elif self._actor is None and time.monotonic() - self._started < EARLY_S:
                wait = EARLY_HEARTBEAT_S  # an actor's identity arrives just after start-up
            else:
                wait = HEARTBEAT_S
            # One call is both the heartbeat and a long poll for commands.
            commands = self._call("heartbeat", info, wait)
            if commands is None:
                self._synced.set()  # no broker: nothing to arm; Ray's loads must not wait
                trig = sys.modules.get("raysleuth.agent.trigger")
                if trig is not None and trig.resume_waiting():  # watchdog: nobody can attach now
                    self.log.warning("%s: the broker is gone; a thread waiting for a debugger runs on", self)
                self._wake.wait(LOOKUP_RETRY_S)
                self._wake.clear()
                continue
            for command in commands:
                if command.get("op") == "breakpoints":
                    # The set may have been armed already, from Ray's KV, when Ray loaded a
                    # class (code_loaded): arming it again would rescan while that code runs.
                    if command.get("version", "") != self.bp_version:
                        self.points = list(command.get("points") or [])
                        self.bp_version = command.get("version", "")
                        self._rearm = True
                else:
                    self._run_command(command)
            self._arm_if_needed()
            self._synced.set()
            self._flush_emits()
            self._flush_events()

    # --- arming -----------------------------------------------------------------------------

    def _arm_if_needed(self) -> None:
        """Arm the points again when they changed, or the worker's rank or actor became known."""
        if not self.points and self.trigger is None:
            return
        with self._arm_lock:
            changed = self._arm_locked()
        if changed:
            self.poke()

    def _arm_locked(self) -> bool:
        ident = self.identity()
        key = (ident.get("rank"), ident.get("actor_class"), ident.get("actor_name"))
        if not self._rearm and key == self._arm_key:
            if self.trigger is not None and self.trigger.points:
                return self._arm_new_modules()
            return False
        self._rearm = False
        self._arm_key = key
        try:
            if self.trigger is None:
                from raysleuth.agent.trigger import Trigger

                self.trigger = Trigger(self)
            self.trigger.update(self.points, ident)
            self.log.info(
                "%s armed %d of %d points (scan %.1f ms)",
                self,
                len(self.trigger.armed),
                len(self.points),
                self.trigger.scan_ms,
            )
        except Exception:  # noqa: BLE001
            self.log.exception("arming failed")
        return True

    def _arm_new_modules(self) -> bool:
        """Modules imported since the last look whose file has a point not armed yet."""
        t = self.trigger
        missing = [p for p in t.points if p.id not in t.armed]
        changed = False
        if not missing:
            return changed
        for mod in list(sys.modules.values()):
            f = getattr(mod, "__file__", None)
            if f and f not in t.scanned_modules and any(p.matches_file(f) for p in missing):
                t.scanned_modules.add(f)
                changed = t.code_loaded(mod) or changed
        return changed

    def code_loaded(self, obj) -> None:
        """Ray loaded a class or function (loadhook): arm it before it runs.

        The agent thread may not have heard from the registry yet (a worker just started, or one
        Ray's pool started before the broker): the set is read from Ray's internal KV here. This
        thread must not wait for the agent thread: looking up the registry's handle needs Ray's
        function manager, which is busy loading this very class.
        """
        if self.disabled:
            return
        if self._static is None:
            if not ray_connected():
                return
            self._identify()  # the agent thread has not got that far yet
        data = _points_from_kv()  # one GCS read, in this thread: no actor handle needed
        if data is not None and data.get("version") != self.bp_version:
            self.points = list(data.get("points") or [])
            self.bp_version = data.get("version") or ""
            self._rearm = True
            self._arm_if_needed()  # arms the class just loaded too (a full scan)
            return
        # The agent thread may have taken this version from the registry and be scanning right
        # now (or be about to): wait for its scan, or do it here, so the class is armed before
        # its first call. The scan never waits on Ray, so holding the lock here is safe.
        with self._arm_lock:
            if self.points and (self._rearm or self.trigger is None):
                changed = self._arm_locked()
            else:
                t = self.trigger
                changed = bool(t is not None and t.points and t.code_loaded(obj))
        if changed:
            self.poke()

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
