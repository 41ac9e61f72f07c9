"""Post-mortem inside a worker: capture an uncaught exception at the raise site, hold for attach.

Ray asks `ray.util.pdb._is_ray_debugger_post_mortem_enabled()` in the except block where a task
or actor method failed (before it wraps the error in a RayTaskError), and calls
`ray.util.pdb._post_mortem()` there when the answer is yes. That is Ray's RAY_DEBUG_POST_MORTEM=1
switch, which waits for a debugger forever and keeps nothing. The agent answers yes itself (no
env var, no code change) and puts its own `_post_mortem` in place, which

1. records the exception, the traceback's frames with bounded reprs of their locals, the worker,
   a GPU memory sample (at a CUDA out-of-memory error also torch's memory summary and the
   largest live allocations) and the worker's last events, and sends the record to the broker;
2. if the broker says someone is watching, holds the worker for an attach, at most the hold
   time: an attached session stops at the raise frame with reason `exception`;
3. returns, always, without raising: Ray then raises its usual RayTaskError in the caller.

Ray Data also asks the switch, to keep a UDF's original exception: it gets Ray's own answer.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
import types

from raysleuth.agent import debugger, stops
from raysleuth.agent.identity import ray_connected, role_at
from raysleuth.agent.log import swallow
from raysleuth.model import frames as libframes

HOLD_ENV = "RAYSLEUTH_POSTMORTEM_HOLD"
CRASH_CALL_TIMEOUT_S = 5.0
LOCALS_FRAMES = 30
"""Frames of a crash record that carry their locals (innermost first)."""
MAX_TRACEBACK_CHARS = 20_000
MAX_EVENTS = 20

SKIPPED_TYPES = ("KeyboardInterrupt", "SystemExit", "GeneratorExit", "AsyncioActorExit", "TaskCancelledError")
"""Exceptions that end a task on purpose: no crash record."""


_in_capture = threading.local()
_installed = False


def install(agent) -> bool:
    """Put our post-mortem in Ray's place. Idempotent; False if Ray has no such switch."""
    global _installed
    if _installed:
        return True
    try:
        import ray.util.rpdb as rpdb
    except Exception:  # noqa: BLE001 - no Ray debugger module: no post-mortem, the worker runs on
        swallow("importing ray.util.rpdb for post-mortem")
        return False
    original_enabled = getattr(rpdb, "_is_ray_debugger_post_mortem_enabled", None)
    if original_enabled is None or not hasattr(rpdb, "_post_mortem"):
        return False

    def _is_ray_debugger_post_mortem_enabled():
        try:
            caller = sys._getframe(1).f_globals.get("__name__", "")
        except (ValueError, AttributeError):
            caller = ""
        if isinstance(caller, str) and caller.startswith("ray.data"):
            return original_enabled()
        return not agent.disabled

    def _post_mortem():
        on_exception(agent, sys.exc_info())

    setattr(_is_ray_debugger_post_mortem_enabled, "raysleuth", True)  # noqa: B010 - marks our wraps
    setattr(_post_mortem, "raysleuth", True)  # noqa: B010
    rpdb._is_ray_debugger_post_mortem_enabled = _is_ray_debugger_post_mortem_enabled
    rpdb._post_mortem = _post_mortem
    _installed = True
    return True


def _qualified(t: type) -> str:
    mod = getattr(t, "__module__", "") or ""
    name = getattr(t, "__qualname__", getattr(t, "__name__", "?"))
    return name if mod in ("builtins", "") else f"{mod}.{name}"


def _message(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception as e:  # noqa: BLE001 - the user's __str__ failed: say so in the record
        text = f"<str() failed: {type(e).__name__}>"
    return text if len(text) <= 2000 else text[:2000] + "…"


def _ray_internal(path: str) -> bool:
    ray = sys.modules.get("ray")  # imported in every worker; never imported here
    ray_file = getattr(ray, "__file__", None)
    if ray_file and path.startswith(os.path.dirname(ray_file) + os.sep):
        return True
    return path.endswith(".pyx") or "/ray/_raylet" in path


def _user_part(frames: list) -> list:
    """Drop the outermost frames while they are Ray's task executor (innermost first list), and
    the tracing wrappers Ray puts around every actor method (`_resume_span`), wherever they are."""
    end = len(frames)
    while end > 1 and _ray_internal(frames[end - 1][0].f_code.co_filename):
        end -= 1
    kept = [
        (f, line)
        for f, line in frames[:end]
        if not (f.f_code.co_filename.replace(os.sep, "/").endswith("ray/util/tracing/tracing_helper.py"))
    ]
    return kept or frames[:end]


def _chain(exc: BaseException) -> list[dict]:
    out: list[dict] = []
    seen = {id(exc)}
    cur = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    while cur is not None and id(cur) not in seen and len(out) < 5:
        seen.add(id(cur))
        out.append({"exc_type": _qualified(type(cur)), "message": _message(cur)})
        cur = cur.__cause__ or (None if cur.__suppress_context__ else cur.__context__)
    return out


def _events(agent) -> list[dict]:
    from raysleuth.agent.capture import bounded_repr

    out = []
    for ev in list(agent.events)[-MAX_EVENTS:]:
        try:
            fields = {str(k): bounded_repr(v) for k, v in dict(ev.get("fields") or {}).items()}
            out.append({"t": ev.get("t"), "name": str(ev.get("name")), "fields": fields})
        except Exception:  # noqa: BLE001 - one odd event must not cost the record
            swallow("copying an event into a crash record")
    return out


def _task() -> dict:
    out: dict = {}
    try:
        if not ray_connected():  # get_runtime_context() would start a Ray
            return out
        import ray

        ctx = ray.get_runtime_context()
        out["task_id"] = ctx.get_task_id()
        name = getattr(ctx, "get_task_name", None)
        out["task"] = name() if name is not None else None
    except Exception:  # noqa: BLE001
        swallow("reading the failed task's id and name")
    return out


def _raise_frames(exc, tb) -> tuple[list, BaseException | None]:
    """The frames to record, innermost first, and the user's exception when a library re-raised it.

    A library that re-raises a user's error from its own code (Ray Data: `raise
    UserCodeException(...) from e`) leaves only its own frames on the traceback: the user's
    frames are then on the cause's, put in front, and that cause is the error the record names."""
    from raysleuth.agent import capture

    frames = _user_part(capture.traceback_frames(tb))
    cause, seen, users = getattr(exc, "__cause__", None), set(), None
    while (
        cause is not None
        and id(cause) not in seen
        and cause.__traceback__ is not None
        and all(_ray_internal(f.f_code.co_filename) for f, _line in frames)
    ):
        seen.add(id(cause))
        frames = capture.traceback_frames(cause.__traceback__) + frames
        users = cause
        cause = cause.__cause__
    return frames, users


def build_record(agent, exc_info) -> dict:
    """The crash record of `exc_info` (the exception being handled), bounded in size and time."""
    from raysleuth.agent import capture
    from raysleuth.probes import gpu

    t0 = time.perf_counter()
    exc_type, exc, tb = exc_info
    cuda_memory = gpu.cuda_oom_evidence(exc, swallow)  # first: the reprs below may allocate
    frames, users = _raise_frames(exc, tb)
    entries = libframes.mark(capture.frames_record(frames, locals_frames=LOCALS_FRAMES))
    try:
        text = "".join(traceback.format_exception(exc_type, exc, tb))
    except Exception:  # noqa: BLE001
        swallow("formatting the traceback of %s", exc_type)
        text = ""
    named = users if users is not None else exc
    record = {
        "kind": "exception",
        "time": time.time(),
        "exc_type": _qualified(type(named)),
        "message": _message(named),
        "raised_as": f"{_qualified(exc_type)}: {_message(exc)}" if users is not None else None,
        "traceback": text[-MAX_TRACEBACK_CHARS:],
        "frames": entries,
        "sources": capture.sources_of(entries),
        "chain": _chain(named),
        "identity": role_at(agent.identity(), frames[0][0] if frames else None),  # verl's role (#38)
        **_task(),
        "gpu": gpu.sample(swallow),
        "cuda_memory": cuda_memory,
        "events": _events(agent),
        "faulthandler": None,
    }
    if users is None:  # the user's own task raised: keep the call for a rerun
        from raysleuth.agent import rerun

        record["rerun"], blob = rerun.capture(frames, _ray_internal)
        if blob is not None:
            record["rerun_blob"] = blob
    record["capture_ms"] = round((time.perf_counter() - t0) * 1000, 2)
    return record


def hold_request() -> float | None:
    """This worker's RAYSLEUTH_POSTMORTEM_HOLD, sent with the record (None: the broker's)."""
    env = os.environ.get(HOLD_ENV)
    if env in (None, ""):
        return None
    try:
        return max(0.0, float(env))
    except ValueError:
        return None


def hold_seconds(answer: dict | None) -> float:
    """How long to hold: the registry's answer (0 when nobody watches)."""
    if not answer or not answer.get("watched"):
        return 0.0
    try:
        return max(0.0, float(answer.get("hold", 0) or 0))
    except (TypeError, ValueError):
        return 0.0


def on_exception(agent, exc_info) -> None:
    """Capture, report, maybe hold. Never raises; re-entry (a crash in our own code) is ignored."""
    if getattr(_in_capture, "active", False) or agent.disabled or exc_info[1] is None:
        return
    if type(exc_info[1]).__name__ in SKIPPED_TYPES:
        return
    _in_capture.active = True
    try:
        record = build_record(agent, exc_info)
        answer = agent.report_crash(dict(record, hold_request=hold_request()))
        agent.log.info("crash record of %s: %s", type(exc_info[1]).__name__, answer or "waits for a broker")
        hold = hold_seconds(answer)
        if hold > 0 and answer.get("id"):
            _hold(agent, exc_info, record, answer["id"], hold)
    except Exception:  # noqa: BLE001 - Ray raises the user's error as usual, whatever happens here
        swallow("post-mortem capture")
    finally:
        _in_capture.active = False


def at_user_frame(exc_info):
    """`exc_info` with its traceback cut after the innermost frame of the user's, so debugpy
    stops on the user's line, as a raise inside torch or a verl wrapper stops with justMyCode
    (#38); unchanged where the user's frame is innermost already or the traceback has none. The
    exception keeps its own traceback, the record all its frames."""
    exc_type, exc, tb = exc_info
    entries = []
    while tb is not None:
        entries.append(tb)
        tb = tb.tb_next
    users = [i for i, t in enumerate(entries) if not libframes.is_library(t.tb_frame.f_code.co_filename)]
    if not users or users[-1] == len(entries) - 1:
        return exc_info
    cut = None
    for t in reversed(entries[: users[-1] + 1]):
        cut = types.TracebackType(cut, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return (exc_type, exc, cut)


def _hold(agent, exc_info, record: dict, crash_id: str, hold: float) -> None:
    debugger.open_listener()
    top = libframes.top_user(record["frames"]) or {}  # the user's raise line, not a wrapper's (#38)
    stops.set_crashed(
        {
            "crash": crash_id,
            "path": top.get("path"),
            "line": top.get("line"),
            "reason": "exception",
            "held_until": time.time() + hold,
        }
    )
    agent.poke()
    agent.log.info("%s holds crash %s for %.0f s", agent, crash_id, hold)
    try:
        if debugger.wait_for_client(timeout=hold) and not debugger.stop_at_exception(at_user_frame(exc_info)):
            agent.log.warning("this debugpy cannot stop at an exception: crash %s goes on", crash_id)
    finally:
        stops.set_crashed(None)
        agent.poke()
