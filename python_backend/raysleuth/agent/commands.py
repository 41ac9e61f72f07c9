"""Commands the broker sends to a worker's agent (through the registry actor), run in the agent
thread. Each returns a JSON-able dict with "ok"; none may raise into the worker.
"""

from __future__ import annotations

import os
import sys
import threading

LISTEN_HOST = "127.0.0.1"
"""debugpy listens on loopback only: the node relay is the one way in."""

_listener: tuple[str, int] | None = None
"""(host, port) of this worker's debugpy listener, once opened (debugpy allows one per process)."""

_lock = threading.Lock()


def open_listener() -> tuple[str, int]:
    """Open debugpy on 127.0.0.1 with its in-process adapter, once; reuse Ray's if it has one.

    After ours, Ray is told the port so that a user's own `breakpoint()` (Ray's debugpy path)
    reuses it instead of failing on a second `listen()`.
    """
    global _listener
    with _lock:
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

        host, port = debugpy.listen((LISTEN_HOST, 0), in_process_debug_adapter=True)
        _listener = (host, int(port))
        try:
            w.set_debugger_port(port)
        except Exception:  # noqa: BLE001 - older Ray: breakpoint() would then open its own
            pass
        return _listener


def file_digests(root: str, relpaths: list[str]) -> dict[str, str | None]:
    """sha256 of root/rel for each rel (None where missing): path mapping checks content with it."""
    import hashlib
    import os

    out: dict[str, str | None] = {}
    for rel in relpaths[:50]:
        path = os.path.join(root, rel)
        try:
            with open(path, "rb") as f:
                out[rel] = hashlib.sha256(f.read(4 << 20)).hexdigest()
        except OSError:
            out[rel] = None
    return out


def _skipped_dirs() -> tuple[str, ...]:
    dirs = [os.path.dirname(os.path.dirname(__file__)) + os.sep + "agent" + os.sep, threading.__file__]
    for name in ("debugpy", "pydevd", "ray.util.debugpy"):
        mod = sys.modules.get(name)
        f = getattr(mod, "__file__", None)
        if f:
            dirs.append(os.path.dirname(f) + os.sep if name != "ray.util.debugpy" else f)
    return tuple(dirs)


def user_frame(frame):
    """The innermost frame of user code in a thread stopped by the debugger (not ours, not pydevd's)."""
    skip = _skipped_dirs()
    f = frame
    while f is not None:
        name = f.f_code.co_filename
        if not name.startswith(skip) and "_pydevd_" not in name and "pydevd" not in os.path.basename(name):
            return f
        f = f.f_back
    return None


def evaluate(expression: str) -> dict:
    """Evaluate in the frame where this worker is paused now (after any stepping)."""
    from raysleuth.agent import breakpoint as bp
    from raysleuth.agent.capture import bounded_repr

    tid = bp.paused_thread
    if tid is None:  # paused from the editor (DAP pause) or stepping: the task thread
        tid = threading.main_thread().ident
    frame = user_frame(sys._current_frames().get(tid))
    if frame is None:
        return {"ok": False, "error": "this worker is not paused"}
    where = {"path": frame.f_code.co_filename, "line": frame.f_lineno}
    try:
        value = eval(compile(expression, "<evaluate>", "eval"), frame.f_globals, frame.f_locals)  # noqa: S307
    except Exception as exc:  # noqa: BLE001 - the user's expression failed: that is the answer
        return {"ok": True, "error": f"{type(exc).__name__}: {exc}", **where}
    return {"ok": True, "value": bounded_repr(value), "type": type(value).__name__, **where}


def run(agent, command: dict) -> dict:
    op = command.get("op")
    if op == "evaluate":
        return evaluate(str(command.get("expression", "")))
    if op == "resume":
        trig = sys.modules.get("raysleuth.agent.trigger")
        return {"ok": True, "resumed": trig.resume_waiting() if trig is not None else 0}
    if op == "digests":
        return {"ok": True, "digests": file_digests(command["root"], list(command.get("paths") or []))}
    if op == "listen":
        host, port = open_listener()
        return {"ok": True, "host": host, "port": port}
    if op == "ping":
        return {"ok": True}
    return {"ok": False, "error": f"unknown command {op!r}"}
