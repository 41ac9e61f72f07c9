"""Commands the broker sends to a worker's agent (through the registry actor), run in the agent
thread. Each returns a JSON-able dict with "ok"; none may raise into the worker.
"""

from __future__ import annotations

import os
import sys
import threading

from raysleuth.agent import debugger, stops
from raysleuth.agent.threads import hide_from_debugger
from raysleuth.shared.limits import EVALUATE_BUDGET_S


def file_digests(root: str, relpaths: list[str]) -> dict[str, str | None]:
    """sha256 of root/rel for each rel (None where missing): path mapping checks content with it."""
    import hashlib

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


def evaluate(expression: str, budget: float | None = None) -> dict:
    """Evaluate in the frame where this worker is paused now (after any stepping). `budget`: the
    broker's (a little under its own wait, so that this answer reaches it in time); without one,
    RAYSLEUTH_EVALUATE_BUDGET_S of this worker."""
    from raysleuth.agent.capture import bounded_repr

    frame = stops.paused_frame()  # a breakpoint's own frame, not what its wait runs meanwhile
    if frame is None:
        tid = stops.paused_thread()
        if tid is None:  # paused from the editor (DAP pause) or stepping: the task thread
            tid = threading.main_thread().ident
        frame = user_frame(sys._current_frames().get(tid)) if tid is not None else None
    if frame is None:
        return {"ok": False, "error": "this worker is not paused"}
    where = {"path": frame.f_code.co_filename, "line": frame.f_lineno}
    if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not 0 < budget <= 3600:
        budget = EVALUATE_BUDGET_S
    done, value, exc = bounded_eval(expression, frame, budget)
    if not done:  # `exc` says what became of it: "interrupted" or "runs on"
        return {"ok": True, "running": exc, "error": _still_running(budget, str(exc)), **where}
    if exc is not None:  # the user's expression failed: that is the answer
        return {"ok": True, "error": f"{type(exc).__name__}: {exc}", **where}
    out = {"ok": True, "value": bounded_repr(value), "type": type(value).__name__, **where}
    from raysleuth.agent.log import swallow
    from raysleuth.model.tensors import is_tensor_like, summary

    if is_tensor_like(value):
        try:  # what Compare Across Paused Ranks lines up: the statistics and the hash, not the repr
            out["summary"] = dict(summary(value), name=expression)
        except Exception:  # noqa: BLE001 - the repr still answers
            swallow("summarizing an evaluated tensor")
    return out


INTERRUPT_GRACE_S = 0.5
"""How long an evaluate over its budget has to end once interrupted before it counts as running on."""


class EvaluateInterrupted(BaseException):
    """Raised in an evaluate's own thread once it outlasts its budget (a BaseException, so that
    the user's `except Exception` does not swallow it)."""


def _still_running(budget: float, fate: str) -> str:
    if fate == "interrupted":
        tail = "interrupted (its Python code was stopped); the worker takes a continue and other evaluates"
    else:
        tail = (
            "it is inside a C call that releases the GIL (a sleep, I/O, a lock) and stops at the next"
            " line of Python after it; the worker takes a continue and other evaluates meanwhile"
        )
    return f"still running after {budget:g} s: {tail}"


def bounded_eval(expression: str, frame, budget: float) -> tuple[bool, object, object]:
    """Evaluate in `frame` on a thread of its own, so the agent thread stays free for a continue:
    (True, value, None), (True, None, exception), or (False, None, "interrupted" | "runs on")
    when it still runs after `budget` s.

    The thread traces itself (its own `sys.settrace`, nobody else's thread): past the budget its
    next line or call of Python raises `EvaluateInterrupted` there, and again at each one after
    if the expression catches it. No exception is raised into it from outside: with debugpy in
    the worker, CPython 3.11's PyThreadState_SetAsyncExc left every thread that released the GIL
    waiting until the target thread ran Python again (measured: a 0.1 s sleep of another thread
    took 3 s). Python code stops at once ("interrupted"); a C call that releases the GIL (sleep,
    I/O) stops when it returns ("runs on"); one that holds it (`sum(range(10**12))`) lets no
    thread of the worker run, this one included: the broker answers for the worker then."""
    box: dict = {}
    stop = threading.Event()

    def tracer(frame, event, arg):
        if stop.is_set():
            raise EvaluateInterrupted
        return tracer

    def run() -> None:
        try:
            _settrace(tracer)
            box["value"] = eval(compile(expression, "<evaluate>", "eval"), frame.f_globals, frame.f_locals)  # noqa: S307
        except BaseException as exc:  # noqa: BLE001 - whatever it raised is the answer
            box["error"] = exc
        finally:
            _settrace(None)

    thread = threading.Thread(target=run, name="raysleuth-evaluate", daemon=True)
    hide_from_debugger(thread)  # debugpy, which holds the paused program, must not suspend it
    thread.start()
    thread.join(budget)
    if not thread.is_alive():
        return True, box.get("value"), box.get("error")
    stop.set()
    thread.join(INTERRUPT_GRACE_S)
    return False, None, "runs on" if thread.is_alive() else "interrupted"


def _settrace(fn) -> None:
    """This thread's trace function, set past debugpy's wrapper of `sys.settrace` (which warns)."""
    holder = getattr(sys.modules.get("pydevd_tracing"), "TracingFunctionHolder", None)
    original = getattr(holder, "_original_tracing", None)
    (original or sys.settrace)(fn)


def stacks() -> dict:
    """Every thread's stack (not the agent's own), the flight recorder's last collectives, and
    how long the walk held the GIL: the pause the worker paid (issue 12)."""
    import time

    from raysleuth.agent.log import swallow
    from raysleuth.agent.stacks import dump_threads

    t = time.perf_counter()
    threads = dump_threads(skip_own=True)
    walk_ms = (time.perf_counter() - t) * 1e3
    collectives: list[dict] = []
    try:
        from raysleuth.agent.collectives import read_flight_recorder

        collectives = read_flight_recorder() or []
    except Exception:  # noqa: BLE001 - no collectives is an answer; the stacks still are
        swallow("reading the flight recorder")
    return {"ok": True, "threads": threads, "collectives": collectives, "walk_ms": walk_ms}


def run(agent, command: dict) -> dict:
    op = command.get("op")
    if op == "stacks":
        return stacks()
    if op == "evaluate":
        return evaluate(str(command.get("expression", "")), command.get("budget"))
    if op == "resume":
        return {"ok": True, "resumed": stops.resume_waiting()}
    if op == "digests":
        return {"ok": True, "digests": file_digests(command["root"], list(command.get("paths") or []))}
    if op == "listen":
        return {"ok": True, **debugger.open_listener(), "token": debugger.access_token()}
    if op == "ping":
        return {"ok": True}
    return {"ok": False, "error": f"unknown command {op!r}"}
