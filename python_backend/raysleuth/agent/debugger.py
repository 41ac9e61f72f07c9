"""Handing a stop to debugpy: the loopback listener, waiting for a client, suspending a thread,
and where this worker is paused now (for the worker table and evaluate).

Runs in user threads and the agent thread: imports debugpy only when a stop needs it (never while
idle), and never raises into the task: callers get False or an exception they log themselves.
"""

from __future__ import annotations

import functools
import os
import socket
import sys
import threading

from raysleuth.agent.log import swallow

LISTEN_HOST = "127.0.0.1"
"""debugpy listens on loopback only: the node relay is the one way in."""

_listener: tuple[str, int] | None = None
"""(host, port) of this worker's debugpy listener, once opened (debugpy allows one per process)."""

_listener_lock = threading.Lock()

_paused_at: dict | None = None
"""{path, line, reason[, breakpoint]} while a thread of this worker is stopped, for the worker table."""

_paused_thread: int | None = None
"""Ident of the thread that is stopped (evaluate runs in its frame)."""

_resume_events: set[threading.Event] = set()
"""One per thread waiting for a debugger in `wait_for_client()`; set by `resume_waiting()`."""


# --- the listener ----------------------------------------------------------------------------


def open_listener() -> tuple[str, int]:
    """Open debugpy on 127.0.0.1 with its in-process adapter, once; reuse Ray's if it has one.

    After ours, Ray is told the port so that a user's own `breakpoint()` (Ray's debugpy path)
    reuses it instead of failing on a second `listen()`.
    """
    global _listener
    with _listener_lock:
        if _listener is not None:
            return _listener
        import ray

        w = ray._private.worker.global_worker
        ray_port = w.debugger_port  # a GCS lookup: set when Ray's breakpoint() listens already
        if ray_port:  # Ray's breakpoint() already listens, on the node's address
            _listener = (w.node_ip_address, int(ray_port))
            return _listener
        os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # no warning in the worker's log
        import debugpy
        import debugpy.server.api  # noqa: F401 - loads the vendored pydevd

        no_delay_on_debugger_sockets()

        host, port = debugpy.listen((LISTEN_HOST, 0), in_process_debug_adapter=True)
        _listener = (host, int(port))
        try:
            w.set_debugger_port(port)
        except Exception:  # noqa: BLE001 - older Ray: breakpoint() would then open its own
            swallow("telling Ray the debugger port %s", port)
        return _listener


def no_delay_on_debugger_sockets() -> bool:
    """Turn Nagle's algorithm off on every socket pydevd talks DAP on (True once in place).

    pydevd writes a response and the events after it as separate small sends; with Nagle on, the
    second waits for the client's delayed ACK (about 40 ms on Linux), so every request to a
    stopped worker took ~44 ms, and a step in the editor (stackTrace, scopes, variables) over 100.
    """
    cls = getattr(sys.modules.get("pydevd"), "PyDB", None)
    original = getattr(cls, "initialize_network", None)
    if original is None:
        return False
    if getattr(original, "raysleuth_no_delay", False):
        return True

    @functools.wraps(original)
    def initialize_network(self, sock, *args, **kwargs):
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except Exception:  # noqa: BLE001 - not TCP (or closed already): nothing to tune
            swallow("setting TCP_NODELAY on the debugger's socket")
        return original(self, sock, *args, **kwargs)

    initialize_network.raysleuth_no_delay = True
    cls.initialize_network = initialize_network
    return True


# --- the paused state ------------------------------------------------------------------------


def set_paused(where: dict | None) -> None:
    """Note that the calling thread stops at `where` ({path, line, reason}), or runs again (None)."""
    global _paused_at, _paused_thread
    _paused_at = where
    _paused_thread = threading.get_ident() if where is not None else None


def paused_at() -> dict | None:
    """Where this worker is stopped now (a copy), or None."""
    where = _paused_at
    return dict(where) if where is not None else None


def paused_thread() -> int | None:
    """The ident of the stopped thread, or None (paused from the editor, or stepping)."""
    return _paused_thread


# --- waiting for a client ----------------------------------------------------------------------


def wait_for_client(timeout: float | None = None) -> bool:
    """Wait until a debugger is attached (True), or the wait is cancelled or times out (False)."""
    import pydevd

    if pydevd._is_attached():
        return True
    ev = threading.Event()
    ev.resumed = False
    _resume_events.add(ev)
    timer = None
    if timeout is not None:
        timer = threading.Timer(timeout, resume_one, (ev,))
        timer.daemon = True
        timer.start()
    try:
        w = getattr(sys.modules.get("ray._private.worker"), "global_worker", None)
        paused = getattr(w, "worker_paused_by_debugger", None) if getattr(w, "connected", False) else None
        if paused is not None:  # Ray's State API then counts this thread as paused
            with paused():
                pydevd._wait_for_attach(cancel=ev)
        else:
            pydevd._wait_for_attach(cancel=ev)
    finally:
        _resume_events.discard(ev)
        if timer is not None:
            timer.cancel()
    return not ev.resumed and pydevd._is_attached()


def resume_one(ev: threading.Event) -> None:
    """Let one waiting thread go on without a debugger (pydevd sets the event itself on attach:
    `resumed` tells the two apart)."""
    ev.resumed = True
    ev.set()


def resume_waiting() -> int:
    """Let every thread that waits for a debugger go on without one ("Continue all paused", or
    the watchdog when the broker is gone). Returns how many there were."""
    evs = list(_resume_events)
    for ev in evs:
        resume_one(ev)
    return len(evs)


# --- stopping ----------------------------------------------------------------------------------


def debugpy_will_stop(frame, line: int) -> bool:
    """A session attached with its own breakpoint on this line, or stepping: debugpy stops there."""
    pydevd = sys.modules.get("pydevd")
    if pydevd is None:
        return False
    try:
        py_db = pydevd.get_global_debugger()
        if py_db is None or not py_db.is_attached():
            return False
        info = getattr(threading.current_thread(), "additional_info", None)
        if info is not None and getattr(info, "pydev_step_cmd", -1) not in (-1, None):
            return True
        filename = frame.f_code.co_filename
        for path, lines in list(getattr(py_db, "breakpoints", {}).items()):
            if line in lines and os.path.normcase(os.path.realpath(path)) == os.path.normcase(
                os.path.realpath(filename)
            ):
                return True
    except Exception:  # noqa: BLE001 - pydevd internals: if unsure, stop ourselves
        swallow("asking pydevd whether it stops at line %s", line)
        return False
    return False


def stop_here(agent, frame, point_id: str | None) -> None:
    """Stop this thread at `frame` in debugpy, waiting for a client (the broker) first.

    `agent` is told (`poke`) when the pause starts and ends, so the worker table shows it.
    """
    line = frame.f_lineno
    if debugpy_will_stop(frame, line):
        return
    try:
        open_listener()
    except Exception:  # noqa: BLE001
        agent.log.exception("opening the debugger for a breakpoint failed")
        return
    set_paused(
        {"path": frame.f_code.co_filename, "line": line, "reason": "breakpoint", "breakpoint": point_id}
    )
    agent.poke()
    try:
        if wait_for_client():
            suspend(frame)
    except Exception:  # noqa: BLE001
        agent.log.exception("stopping in debugpy failed")
    finally:
        set_paused(None)
        agent.poke()


def suspend(frame) -> None:
    """Suspend in pydevd with `frame` as the top frame, at its current line (not the next one)."""
    import pydevd
    from _pydevd_bundle.pydevd_comm_constants import CMD_SET_BREAK

    py_db = pydevd.get_global_debugger()
    thread = threading.current_thread()
    # Tracing on for this thread (as Ray's set_trace does), so that stepping works afterwards.
    pydevd.settrace(suspend=False, trace_only_current_thread=False, patch_multiprocessing=False)
    info = py_db.set_additional_thread_info(thread)
    info.is_tracing += 1  # pydevd's tracer must not stop in these frames of ours first (3.11)
    try:
        py_db.set_trace_for_frame_and_parents(thread.ident, frame)
        py_db.set_suspend(thread, CMD_SET_BREAK)
        py_db.do_wait_suspend(thread, frame, "line", None)
    finally:
        info.is_tracing -= 1


def stop_at_exception(exc_info) -> bool:
    """Stop in debugpy at the traceback's innermost frame, as an unhandled exception stops.

    False where this debugpy has no way to (pydevd without trigger_exception_handler)."""
    import pydevd

    py_db = pydevd.get_global_debugger()
    trigger_handler = getattr(py_db, "trigger_exception_handler", None)
    if trigger_handler is None:
        return False
    trigger_handler(exc_info, as_uncaught=False)
    return True
