"""A failed Ray task, kept so it can run again under the debugger (issue 26, "Rerun Under
Debugger"). At the failure the agent pickles the task's function (by reference where it can be
imported, by value otherwise, as Ray does) and its arguments as the failed call's frame holds them
at the raise, while they are small (RAYSLEUTH_RERUN_MAX_BYTES, 64 MiB); the broker keeps the
pickle beside the crash record. A rerun is `raysleuth.shared.rerun_task.run`, submitted by the
broker as a new task.

Only plain tasks: an actor method's state has moved on since, and a library's own task (Ray Data's
map task) is not the user's function.
"""

from __future__ import annotations

import dis
import inspect
import os

from raysleuth.agent.identity import ray_connected
from raysleuth.agent.log import swallow

MAX_BYTES_ENV = "RAYSLEUTH_RERUN_MAX_BYTES"
DEFAULT_MAX_BYTES = 64 << 20


def max_bytes() -> int:
    try:
        return max(0, int(os.environ.get(MAX_BYTES_ENV) or DEFAULT_MAX_BYTES))
    except ValueError:
        return DEFAULT_MAX_BYTES


def first_body_line(code) -> int:
    """The first line a call of `code` runs (past its `def` and decorators)."""
    lines = sorted({line for _, line in dis.findlinestarts(code) if line and line > code.co_firstlineno})
    return lines[0] if lines else code.co_firstlineno


def _task_function(frame):
    """The function object whose code the frame runs, found by its name in its module (a
    `@ray.remote` function is Ray's wrapper there: its `_function`); None if not reachable."""
    obj = frame.f_globals.get(frame.f_code.co_name)
    obj = getattr(obj, "_function", obj)
    return obj if getattr(obj, "__code__", None) is frame.f_code else None


def capture(frames: list, is_internal) -> tuple[dict | None, bytes | None]:
    """What a rerun needs, from the raise's frames (innermost first): ({function, path, line,
    args, bytes} or {unavailable: why}, the pickle). `is_internal(path)` tells Ray's own files."""
    if not frames:
        return None, None
    try:
        if not ray_connected():  # get_runtime_context() would start a Ray
            return {"unavailable": "not raised in a Ray task: nothing to submit again"}, None
        import ray

        ctx = ray.get_runtime_context()
        if ctx.get_actor_id():
            return {"unavailable": "an actor method: its actor's state has moved on since"}, None
        outer = frames[-1][0]
        if is_internal(outer.f_code.co_filename):
            return {"unavailable": "the failed task is Ray's own (a library's task, not your function)"}, None
        fn = _task_function(outer)
        if fn is None:
            return {"unavailable": f"{outer.f_code.co_name} is not reachable by name in its module"}, None
        code, values = outer.f_code, outer.f_locals
        names = code.co_varnames
        args = [values[n] for n in names[: code.co_argcount]]
        kw_end = code.co_argcount + code.co_kwonlyargcount
        kwargs = {n: values[n] for n in names[code.co_argcount : kw_end]}
        if code.co_flags & inspect.CO_VARARGS:
            args += list(values[names[kw_end]])
            kw_end += 1
        if code.co_flags & inspect.CO_VARKEYWORDS:
            kwargs.update(values[names[kw_end]])
        import ray.cloudpickle as cloudpickle

        blob = cloudpickle.dumps((fn, args, kwargs))
        info = {
            "function": f"{fn.__module__}.{fn.__qualname__}",
            "path": fn.__code__.co_filename,
            "line": first_body_line(fn.__code__),
            "args": [_short(a) for a in args] + [f"{k}={_short(v)}" for k, v in kwargs.items()],
            "bytes": len(blob),
            "runtime_env": _runtime_env(ctx),
            "resources": _resources(ctx),
        }
        if len(blob) > max_bytes():
            info = {
                "unavailable": f"its arguments take {len(blob) >> 20} MiB, over {max_bytes() >> 20} MiB"
                f" ({MAX_BYTES_ENV} sets the bound)"
            }
            return info, None
        return info, blob
    except Exception as exc:  # noqa: BLE001 - the record goes out without a rerun
        swallow("keeping the failed task for a rerun")
        return {"unavailable": f"its call could not be kept ({type(exc).__name__}: {exc})"[:300]}, None


def _short(value) -> str:
    from raysleuth.agent.capture import bounded_repr

    return bounded_repr(value)[:200]


def _runtime_env(ctx) -> dict | None:
    try:
        env = ctx.runtime_env
        return dict(env) if env else None
    except Exception:  # noqa: BLE001
        return None


def _resources(ctx) -> dict:
    try:
        return {k: v for k, v in (ctx.get_assigned_resources() or {}).items() if k in ("CPU", "GPU")}
    except Exception:  # noqa: BLE001
        return {}
