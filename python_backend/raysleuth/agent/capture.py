"""Bounded evidence from a live stack or a traceback: frames, locals as short reprs, source.

Used for snapshot points and crash records, inside user code: nothing here may raise into the
task, and a user's `__repr__` that raises, or hangs, must not hurt the worker. So values are
turned into text by one helper thread with a time limit per value: a repr that overruns is
noted as such and its thread is left behind (a daemon), and the rest goes on in a fresh one.
"""

from __future__ import annotations

import linecache
import os
import queue
import reprlib
import threading
import time
import types

from raysleuth.agent.log import swallow
from raysleuth.agent.threads import hide_from_debugger
from raysleuth.model.tensors import tensor_text

MAX_FRAMES = 30
"""Frames recorded by a snapshot, innermost first."""
LOCALS_FRAMES = 8
"""Frames of a snapshot that carry their locals (the innermost ones)."""
MAX_LOCALS = 60
"""Locals per frame."""
REPR_LIMIT_S = 0.2
"""Longest one value's repr may take before it is given up."""
TOTAL_LIMIT_S = 2.0
"""Longest all reprs of one capture may take; what is left then is not captured."""
MAX_STUCK = 3
"""Reprs that may overrun in one capture before the rest is skipped."""
SOURCE_FILE_LIMIT = 256 * 1024
SOURCE_TOTAL_LIMIT = 1024 * 1024
"""Bytes of source kept per file and per record (for a replay after the process is gone)."""


class _SummaryRepr(reprlib.Repr):
    """reprlib, but a torch tensor or numpy array (also inside a list or dict) is its summary,
    `Tensor[1024, 4096] float32 cuda:0 norm=3.2e+01 nan=0`, never a cut-off list of numbers."""

    def repr1(self, x, level):
        text = tensor_text(x)
        return text if text is not None else super().repr1(x, level)

    def repr_bytes(self, x, level):
        return self._cut_bytes(x, "b")

    def repr_bytearray(self, x, level):
        return self._cut_bytes(x, "bytearray(b")

    def _cut_bytes(self, x, head: str) -> str:
        # reprlib has no rule for these: it would repr all of a 1 GB buffer (seconds holding the
        # GIL, 4 GB of text) to keep 200 characters. Only the part shown is turned into text.
        if len(x) <= self.maxstring // 4:
            return repr(x)
        text = repr(bytes(x[: self.maxstring]))  # b'...': at most 4 characters a byte
        quote, body = text[1], text[2:-1][: self.maxstring - 40]
        tail = ")" if head != "b" else ""
        return f"{head}{quote}{body}...{quote}{tail} <{len(x)} bytes>"


_repr = _SummaryRepr()
_repr.maxstring = 200
_repr.maxother = 200
_repr.maxlist = _repr.maxtuple = _repr.maxdict = _repr.maxset = 12
_repr.maxlevel = 3


def bounded_repr(value) -> str:
    """A short repr that never raises (a repr that fails says so instead)."""
    try:
        return _repr.repr(value)
    except Exception as exc:  # noqa: BLE001 - a user's __repr__ may raise anything
        return f"<repr failed: {type(exc).__name__}>"


class _GiveUp(BaseException):
    """Raised into an abandoned repr thread: a `__repr__` looping in Python stops there instead
    of spinning for the life of the worker (one blocked in C, on a lock, stays blocked, idle)."""


class _ReprThread:
    """A daemon thread that turns values into bounded reprs, one job at a time."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.current: tuple[int, int, float] | None = None
        """(job id, index, since when) of the value being turned into text now."""
        self.abandoned = False
        self.thread = threading.Thread(target=self._run, name="raysleuth-repr", daemon=True)
        self.thread.start()

    def abandon(self) -> None:
        self.abandoned = True
        try:
            import ctypes

            ident = self.thread.ident
            if ident is not None and self.thread.is_alive():
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), ctypes.py_object(_GiveUp))
        except Exception:  # noqa: BLE001 - no ctypes: the thread is left behind as it is
            swallow("interrupting an abandoned repr thread")

    def _run(self) -> None:
        try:
            self._serve()
        except _GiveUp:
            return

    def _serve(self) -> None:
        hide_from_debugger(threading.current_thread())
        while not self.abandoned:
            job = self.jobs.get()
            if job is None:
                return
            values, out, done = job
            for i in range(len(out), len(values)):
                if self.abandoned or done.is_set():
                    break
                self.current = (id(job), i, time.monotonic())
                out.append(bounded_repr(values[i]))
            self.current = None
            done.set()


_pool_lock = threading.Lock()
_pool: _ReprThread | None = None


def _thread() -> _ReprThread:
    global _pool
    with _pool_lock:
        if _pool is None or _pool.abandoned or not _pool.thread.is_alive():
            _pool = _ReprThread()
        return _pool


def safe_reprs(values: list, per_value_s: float = REPR_LIMIT_S, total_s: float = TOTAL_LIMIT_S) -> list[str]:
    """Bounded reprs of `values`, in order; one that takes over `per_value_s` is given up."""
    out: list[str] = []
    if not values:
        return out
    deadline = time.monotonic() + total_s
    stuck = 0
    while len(out) < len(values):
        worker = _thread()
        done = threading.Event()
        part: list[str] = []
        job = (values[len(out) :], part, done)
        worker.jobs.put(job)
        while not done.wait(per_value_s / 4):
            cur = worker.current
            now = time.monotonic()
            if now > deadline or (cur is not None and cur[0] == id(job) and now - cur[2] > per_value_s):
                break
        done.set()  # the thread stops after the value it is on, if it ever returns
        out.extend(part[: len(values) - len(out)])
        if len(out) >= len(values):
            break
        # The value at len(out) overran (or time is up): stop its thread, or leave it behind.
        worker.abandon()
        stuck += 1
        if time.monotonic() > deadline or stuck >= MAX_STUCK:
            out.extend(["<not captured: reprs took too long>"] * (len(values) - len(out)))
            break
        out.append(f"<repr took over {per_value_s * 1000:.0f} ms: {_type_name(values[len(out)])}>")
    return out


def _type_name(value) -> str:
    try:
        t = type(value)
        return f"{t.__module__}.{t.__qualname__}" if t.__module__ != "builtins" else t.__qualname__
    except Exception:  # noqa: BLE001 - an odd type object: its name is not worth failing for
        swallow("naming the type of a value")
        return "?"


def _locals_items(frame) -> list[tuple[str, object]]:
    try:
        return [(str(k), v) for k, v in list(frame.f_locals.items())[:MAX_LOCALS]]
    except Exception:  # noqa: BLE001 - the frame's locals are not readable: none recorded
        swallow("reading the locals of %s", frame.f_code.co_name)
        return []


def frames_record(
    frames: list[tuple[types.FrameType, int]], locals_frames: int = LOCALS_FRAMES, safe: bool = True
) -> list[dict]:
    """[(frame, line)] innermost first → [{path, line, function, locals}] with bounded reprs."""
    entries: list[dict] = []
    names: list[tuple[int, str]] = []
    values: list = []
    for i, (f, line) in enumerate(frames):
        code = f.f_code
        entries.append({"path": code.co_filename, "line": line, "function": code.co_name, "locals": {}})
        if i < locals_frames:
            for name, value in _locals_items(f):
                names.append((i, name))
                values.append(value)
    texts = safe_reprs(values) if safe else [bounded_repr(v) for v in values]
    for (i, name), text in zip(names, texts, strict=True):
        entries[i]["locals"][name] = text
    return entries


def stack_frames(frame, max_frames: int = MAX_FRAMES) -> list[tuple[types.FrameType, int]]:
    """A live stack from `frame` outward: [(frame, line)], innermost first."""
    out: list[tuple[types.FrameType, int]] = []
    f = frame
    while f is not None and len(out) < max_frames:
        out.append((f, f.f_lineno))
        f = f.f_back
    return out


def traceback_frames(tb, max_frames: int = 50) -> list[tuple[types.FrameType, int]]:
    """A traceback's frames, innermost (the raise site) first; the outermost are dropped if long."""
    out = []
    while tb is not None:
        out.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    out.reverse()
    return out[:max_frames]


def capture_frames(frame, max_frames: int = MAX_FRAMES, locals_frames: int = LOCALS_FRAMES) -> list[dict]:
    """The stack from `frame` outward: [{path, line, function, locals}], innermost first."""
    return frames_record(stack_frames(frame, max_frames), locals_frames)


def sources_of(entries: list[dict]) -> dict[str, str]:
    """Source text of the files in `entries` (bounded), so a replay can show them anywhere."""
    out: dict[str, str] = {}
    total = 0
    for e in entries:
        path = e["path"]
        if path in out or not path or path.startswith("<") or not os.path.isfile(path):
            continue
        try:
            text = "".join(linecache.getlines(path))
        except Exception:  # noqa: BLE001 - no source for this file: the record goes without it
            swallow("reading the source of %s", path)
            continue
        text = text[:SOURCE_FILE_LIMIT]
        if total + len(text) > SOURCE_TOTAL_LIMIT:
            break
        total += len(text)
        out[path] = text
    return out
