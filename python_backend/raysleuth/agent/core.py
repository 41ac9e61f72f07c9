"""The worker agent: a daemon thread inside a Ray worker that registers it and heartbeats.

Wires the pieces together (identity, registry link, outbox, arming) and runs the loop: one call
is both the heartbeat and a long poll for commands. Runs inside Ray workers: it never blocks the
task thread, never writes to stdout/stderr, never raises into user code, imports no debugger and
starts no tracing while idle.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time

from raysleuth.agent import stops, taskgate
from raysleuth.agent.arming import Arming, points_from_kv
from raysleuth.agent.identity import Identity, fault_file, ray_connected
from raysleuth.agent.log import swallow
from raysleuth.agent.outbox import Outbox
from raysleuth.agent.registry import LOOKUP_RETRY_S, RegistryLink
from raysleuth.agent.reporting import build_report
from raysleuth.agent.threads import hide_from_debugger

HEARTBEAT_S = float(os.environ.get("RAYSLEUTH_HEARTBEAT_S", "2.0"))
"""Seconds between heartbeats to the registry."""

EARLY_S = 10.0
EARLY_HEARTBEAT_S = 0.5
"""For EARLY_S after start-up, while no actor identity is known yet, report this often."""

CONNECT_TIMEOUT_S = 300.0
"""How long an agent started before Ray connects waits for the connection."""


def _agent_logger():
    # Configured on first use, in the agent thread: at .pth time Ray is not imported yet,
    # and the hook must not import it early on the worker's main thread.
    from raysleuth.agent.log import agent_logger

    return agent_logger()


class Agent:
    """One per process. `str(agent)` says who it is: `Agent[node=3f2a pid=4242 rank=3]`."""

    def __init__(self, source: str) -> None:
        self.source = source
        """How it was started: `env` (RAYSLEUTH=1), `setup_hook` or `api` (raysleuth.init())."""
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = time.monotonic()
        self._synced = threading.Event()
        """Set once the first heartbeat was answered (or no broker runs): code Ray loads after
        that is armed before it runs."""
        self.first_task_wait_s: float | None = None
        self._tensor_looks: dict = {}
        """What the last look for new CUDA tensors saw (probes/gpu.py new_cuda_tensors)."""
        """How long the first task took to read and arm the cluster's points (#22's gate)."""
        self.ident = Identity()
        self.link = RegistryLink(_agent_logger, self.__str__)
        self.outbox = Outbox(self.link, lambda: self.ident.worker_id, self._wake)
        self.arming = Arming(self.identity, self._new_trigger, _agent_logger, self.__str__)

    @property
    def log(self):
        return _agent_logger()

    @property
    def disabled(self) -> bool:
        """This process hosts one of Ray Sleuth's own actors: the agent stays out of it."""
        return self.ident.own_actor

    @property
    def events(self):
        """Last `raysleuth.event()` records of this worker, newest last (crash records carry them)."""
        return self.outbox.recent

    @property
    def trigger(self):
        return self.arming.trigger

    def __str__(self) -> str:
        return str(self.ident)

    def _new_trigger(self):
        from raysleuth.agent.trigger import Trigger

        return Trigger(self)

    # --- life cycle -------------------------------------------------------------------------

    def start(self, wait_for_connect: bool) -> None:
        taskgate.install_early()
        taskgate.on_first_task(self._first_task)
        if self.source != "api":
            # In this thread, now: Ray's main thread must not load a class before the wrap.
            from raysleuth.agent import datahook, loadhook

            loadhook.install_early(self)
            datahook.install_early(self)
        self._thread = threading.Thread(
            target=self._run, args=(wait_for_connect,), name="raysleuth-agent", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def _run(self, wait_for_connect: bool) -> None:
        hide_from_debugger(threading.current_thread())
        try:
            if wait_for_connect and not self._wait_connected():
                return
            self._identify()
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
                self._install_hooks()  # before the first class loads, if we can
            if time.monotonic() > deadline or self._stop.is_set():
                self.log.warning("Ray never connected in pid %s; agent not started", os.getpid())
                return False
            # Ray connects in this process's main thread a few hundred ms after start-up.
            time.sleep(0.05)
        return True

    def _first_task(self) -> None:
        """From Ray's task thread, once, before the task's code runs: the agent may call the
        registry now (it is woken). A point set before the job must fire on this first call too:
        the set the broker left in Ray's KV is read and armed here, in this thread (one GCS read,
        no Ray lock held), instead of waiting for the agent's first heartbeat."""
        t0 = time.monotonic()
        self.link.look_now()
        self._wake.set()
        if not self.disabled:
            data = points_from_kv()
            if data is not None:
                self.arming.arm_first_task(data.get("version"), data.get("points"))
        self.first_task_wait_s = time.monotonic() - t0

    def _identify(self) -> None:
        static = self.ident.read()
        if static["driver"]:
            taskgate.mark_driver()
        else:
            from raysleuth.agent import breakpoint as bp
            from raysleuth.agent import postmortem

            bp.install()
            self._install_hooks()
            postmortem.install(self)
            static["fault_file"] = fault_file()

    def _install_hooks(self) -> None:
        if self.source == "api":
            return  # raysleuth.init() in a driver: it runs no remote code
        from raysleuth.agent import datahook, loadhook

        loadhook.install(self)
        datahook.install(self)

    def _goodbye(self) -> None:
        wid = self.ident.worker_id
        if self.ident.static is None or self.disabled or wid is None:
            return
        self.outbox.flush_rows(force=True)
        self.link.goodbye(wid)

    # --- what the rest of the worker calls --------------------------------------------------

    def identity(self) -> dict:
        """What a rank scope is matched against: node, actor and the rank as known now."""
        return self.ident.current()

    def report(self) -> dict:
        """What the registry learns about this worker now."""
        return build_report(self.ident, self.source, self.arming.version, self.arming.trigger)

    def poke(self) -> None:
        """Send a report now instead of at the next heartbeat (rank or state changed).

        Called from the user's thread: only submits the call (about a millisecond), never waits.
        """
        registry = self.link.handle
        if registry is None or self.ident.static is None:
            self._wake.set()
            return
        try:
            registry.report.remote(self.report())
        except Exception:  # noqa: BLE001
            self.log.exception("poke failed")

    def emit(self, kind: str, payload: dict) -> None:
        """Send a logpoint line or a snapshot to the broker. From the user's thread: never waits."""
        self.outbox.emit(kind, payload)

    def emit_row(self, payload: dict) -> None:
        """A divergence watch's row: queued, sent in a batch by the agent thread. Never waits."""
        self.outbox.emit_row(payload)

    def record_event(self, record: dict, keep: dict | None = None) -> None:
        """From the user's thread: an append, no call (the agent thread sends them in batches).
        `keep` is what the worker's own ring keeps instead (a lighter copy), if given."""
        self.outbox.record_event(record, self.disabled, keep)

    def report_crash(self, record: dict) -> dict | None:
        """Send a crash record to the broker from the failing task's thread: {id, hold, watched}.

        Waits for the answer (a few ms; at most CRASH_CALL_TIMEOUT_S): the hold depends on it.
        """
        from raysleuth.agent.postmortem import CRASH_CALL_TIMEOUT_S

        return self.outbox.send_crash(record, CRASH_CALL_TIMEOUT_S, self.log)

    def rearm_soon(self) -> None:
        """A point ruled itself out (rank known now): arm again at the next heartbeat."""
        self.arming.rearm_soon()

    def code_loaded(self, obj) -> None:
        """Ray loaded a class or function (loadhook): arm it before it runs.

        This thread must not wait for the agent thread: looking up the registry's handle needs
        Ray's function manager, which is busy loading this very class.
        """
        if self.disabled:
            return
        if self.ident.static is None:
            if not ray_connected():
                return
            self._identify()  # the agent thread has not got that far yet
        if self.arming.code_loaded(obj):
            self.poke()

    def code_arrived(self, fn) -> None:
        """cloudpickle rebuilt a function from a pickle (datahook): arm it before it runs.

        Called for every function rebuilt while the cluster has points: no KV read, no wait.
        """
        if not self.disabled and self.arming.code_arrived(fn):
            self.poke()

    def modules_arrived(self) -> None:
        """Reading a pickle imported modules (datahook): arm the code they brought."""
        if not self.disabled and self.arming.modules_arrived():
            self.poke()

    # --- the loop -----------------------------------------------------------------------------

    def _loop(self) -> None:
        from raysleuth.probes import gpu

        while not self._stop.is_set():
            info = self.report()
            if not info.get("driver"):
                sample = gpu.sample(swallow)  # the last one is kept for a worker that dies
                if sample is not None:
                    new = gpu.new_cuda_tensors(self._tensor_looks, sample.get("torch_allocated"), swallow)
                    if new:
                        sample["new_cuda_tensors"] = new  # a memory case names them
                info["gpu"] = sample
            if self.disabled:
                self.log.info("%s is one of Ray Sleuth's own actors; agent stops", self)
                return
            if not self._synced.is_set():
                wait = 0.0  # the first heartbeat answers at once: Ray's first load waits for it
            elif not self.ident.actor_known and time.monotonic() - self._started < EARLY_S:
                wait = EARLY_HEARTBEAT_S  # an actor's identity arrives just after start-up
            else:
                wait = HEARTBEAT_S
            # One call is both the heartbeat and a long poll for commands; a watch's rows leave
            # while it waits.
            rows = (self.outbox.nudge, self.outbox.flush_rows)
            commands = self.link.call("heartbeat", info, wait, extra_timeout=wait, meanwhile=rows)
            if commands is None:
                self._synced.set()  # no broker: nothing to arm; Ray's loads must not wait
                self._resume_waiting_threads()
                self._wake.wait(LOOKUP_RETRY_S)
                self._wake.clear()
                continue
            for command in commands:
                if command.get("op") == "breakpoints":
                    self.arming.take(command.get("version", ""), command.get("points"))
                else:
                    self._run_command(command)
            if self.arming.arm_if_needed():
                self.poke()
            self._synced.set()
            self.outbox.flush_emits()
            self.outbox.flush_events()

    def _resume_waiting_threads(self) -> None:
        """Watchdog: with the broker gone nobody can attach, so a thread waiting for one runs on."""
        if stops.resume_waiting():
            self.log.warning("%s: the broker is gone; a thread waiting for a debugger runs on", self)

    def _run_command(self, command: dict) -> None:
        from raysleuth.agent import commands

        try:
            result = commands.run(self, command)
        except Exception as exc:  # noqa: BLE001 - a failed command must not end the agent
            self.log.exception("command %s failed", command.get("op"))
            result = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        self.link.call("command_result", command["id"], result)
