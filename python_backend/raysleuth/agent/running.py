"""Python 3.11 and older: arm the frames that are running already when a point is armed.

A rewritten `__code__` (backends/rewrite.py) takes effect at the next call; a frame executing the
old code now (a training loop inside one long function) would never fire. Such frames, and only
they, get a narrow tracer: `f_trace` on the frame plus a trace function on its thread alone, which
returns None for every other frame and removes itself as soon as those frames have returned.
Never raises into the task or prints; costs nothing while no running frame is armed.

Why this mechanism (CPython 3.11): `f_trace` is only called while the frame's thread has a trace
function (`tstate->c_tracefunc`); `sys.settrace` sets the calling thread's only, and there is no
safe pure-Python way to set another thread's (its thread state may be freed between two ctypes
calls). debugpy's attach helper library does it atomically, in one C call holding the GIL, with
the same trampoline CPython's `sys.settrace` uses (`AttachDebuggerTracing`, pydevd's
`set_trace_to_threads`); it ships in the debugpy wheel we depend on. The thread removes the trace
function itself, with a plain `sys.settrace(None)`, when its last armed frame returns.

What a worker pays while such a frame runs (bench/breakpoint_cost.py, 3.11): about 0.15 us more
per line the armed frame executes (8-10x on a loop of one arithmetic line, ~1.0x when a pass spends
~20 us in C as a training step does), its thread's other Python code runs traced (2-4.6x), other
threads nothing; once the frame returns (or the point is removed) nothing.
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys
import threading
import types

from raysleuth.agent.codes import nested_codes
from raysleuth.agent.log import swallow

_HELPER_SYMBOLS = (
    "Py_IsInitialized",
    "Py_GetVersion",
    "PyInterpreterState_Head",
    "PyInterpreterState_ThreadHead",
    "PyThreadState_Next",
    "PyThreadState_Swap",
    "_PyThreadState_UncheckedGet",
    "PyGILState_Ensure",
    "PyGILState_Release",
    "PyObject_CallFunctionObjArgs",
    "PyObject_GetAttrString",
    "PyObject_HasAttrString",
    "PyObject_VectorcallDict",
    "PyEval_CallObjectWithKeywords",
    "PyEval_SetTrace",
    "PyLong_FromLong",
    "PyUnicode_InternFromString",
    "PyTuple_New",
    "PyTraceBack_Here",
)
"""What the helper looks up in the interpreter: it prints to stdout when one is missing, so it is
only called where all are there."""

_helper = None
"""debugpy's attach helper's `AttachDebuggerTracing`, once loaded (False: not usable here)."""


def _helper_library_name() -> str | None:
    machine = platform.machine().lower()
    arch = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(machine)
    if arch is None:
        return None
    if sys.platform.startswith("linux"):
        return f"attach_linux_{arch}.so"
    if sys.platform == "darwin":
        return "attach.dylib"
    if sys.platform == "win32":
        return f"attach_{arch}.dll"
    return None


def set_thread_trace():
    """`AttachDebuggerTracing(show_debug_info, settrace, func, thread_id, None)`, or None where
    the helper cannot be used (no debugpy, another platform, an interpreter it does not know)."""
    global _helper
    if _helper is None:
        _helper = False
        try:
            import importlib.util

            name = _helper_library_name()
            spec = importlib.util.find_spec("debugpy")
            known = (3, 10) <= sys.version_info[:2] <= (3, 11)  # it prints for another version
            if (
                known
                and name
                and spec
                and spec.submodule_search_locations
                and sys.implementation.name == "cpython"
            ):
                path = os.path.join(
                    spec.submodule_search_locations[0],
                    "_vendored",
                    "pydevd",
                    "pydevd_attach_to_process",
                    name,
                )
                proc = ctypes.CDLL(None) if sys.platform != "win32" else ctypes.pythonapi
                if os.path.exists(path) and all(hasattr(proc, s) for s in _HELPER_SYMBOLS):
                    fn = ctypes.pydll.LoadLibrary(path).AttachDebuggerTracing  # keeps the GIL
                    fn.argtypes = [
                        ctypes.c_bool,
                        ctypes.py_object,
                        ctypes.py_object,
                        ctypes.c_uint,
                        ctypes.py_object,
                    ]
                    fn.restype = ctypes.c_int
                    _helper = fn
        except Exception:  # noqa: BLE001 - no helper: running frames fire at their next call only
            swallow("loading debugpy's attach helper for running frames")
    return _helper or None


class RunningFrames:
    """The frames armed while running, per thread, and the code objects whose lines they fire.

    `fire(frame, line)` is the trigger's hook body (scope, condition, hit count, logpoint,
    snapshot, stop). Armed from the agent thread; the tracers run in the traced threads.
    """

    def __init__(self, fire) -> None:
        self._fire = fire
        self._lines: dict[int, tuple[types.CodeType, frozenset[int]]] = {}
        """id(code) → (code, the armed lines its frames fire through this tracer): lines the code
        itself does not call the hook at (old code, running or called from a running frame).
        Keyed by id: a code object hashes its constants on every lookup."""
        self._threads: dict[int, dict[int, types.FrameType]] = {}
        """Thread id → its frames armed while running (id(frame) → frame), until they return."""
        self.skipped: dict[int, str] = {}
        """Thread id → why its running frames were not armed (last arming)."""
        self._local = self._on_event
        """Bound once: the frames' `f_trace` (identity tells our frames from others')."""
        self._global = self._on_call
        """Bound once: the traced threads' trace function."""
        self._drop = self._on_released
        """Bound once: `f_trace` of the frames of a thread released while they run."""

    @property
    def threads(self) -> set[int]:
        """Threads traced now (or about to remove their trace function at their next call)."""
        return set(self._threads)

    def arm(self, want, stale: list[types.CodeType]) -> None:
        """Trace the frames running now whose code has armed lines it does not hook itself.

        `want(code)` gives those lines (an empty set when none); `stale` are old code objects a
        traced frame may still call (nested functions made from its old constants)."""
        lines: dict[int, tuple[types.CodeType, frozenset[int]]] = {}

        def wanted(code) -> frozenset[int]:
            got = lines.get(id(code))
            if got is None:
                got = lines[id(code)] = (code, frozenset(want(code)))
            return got[1]

        for code in stale:
            wanted(code)
        me = threading.get_ident()
        found: dict[int, list[types.FrameType]] = {}
        for tid, top in sys._current_frames().items():
            if tid == me:
                continue
            frame: types.FrameType | None = top
            while frame is not None:
                # Its own armed lines, or old nested code it may make functions from (a closure
                # or comprehension defined inside the loop).
                if any(wanted(c) for c in nested_codes(frame.f_code)):
                    found.setdefault(tid, []).append(frame)
                frame = frame.f_back
        self._lines = {k: v for k, v in lines.items() if v[1]}
        for tid in list(self._threads):
            if tid not in found:
                self._release(tid)
        self.skipped = {}
        for tid, frames in found.items():
            self._trace_thread(tid, frames)

    # --- agent thread --------------------------------------------------------------------

    def _release(self, tid: int) -> None:
        """Stop firing in `tid`. The thread removes its trace function itself (it cannot be
        removed safely from here): at its next line in one of these frames, or its next call."""
        for frame in self._threads.pop(tid, {}).values():
            if frame.f_trace is self._local:
                frame.f_trace_lines = True
                frame.f_trace = self._drop

    def _trace_thread(self, tid: int, frames: list[types.FrameType]) -> None:
        known = self._threads.get(tid)
        if known is not None:  # traced already: the frames found now replace those before
            now = {id(f): f for f in frames if f.f_trace is None or self._ours(f.f_trace)}
            for key, frame in list(known.items()):
                if key not in now and frame.f_trace is self._local:
                    _give_back(frame)
            for frame in now.values():
                self._take(frame)
            known.clear()
            known.update(now)
            if not known:
                self._threads.pop(tid, None)
            return
        why = self._why_not(tid, frames)
        if why:
            self.skipped[tid] = why
            return
        helper = set_thread_trace()
        if helper is None:
            self.skipped[tid] = "no way to trace another thread here (debugpy's attach helper)"
            return
        mine = {id(f): f for f in frames}
        for frame in frames:
            self._take(frame)
        self._threads[tid] = mine
        rc = helper(False, sys.settrace, self._global, tid & 0xFFFFFFFF, None)
        if rc != 0:
            self._release(tid)
            self.skipped[tid] = f"debugpy's attach helper answered {rc}"
            return
        # A frame that returned before its thread had the trace function sent no `return`:
        # forget it here (the thread then removes its trace function at its next call).
        running = _stack_ids(sys._current_frames().get(tid))
        for key in [k for k in mine if k not in running]:
            frame = mine.pop(key)
            if frame.f_trace is self._local:
                _give_back(frame)
        if not mine:
            self._threads.pop(tid, None)

    def _ours(self, f_trace) -> bool:
        return f_trace is self._local or f_trace is self._drop

    def _take(self, frame) -> None:
        """Our `f_trace` on a running frame: line events only where its own code has armed
        lines (a frame that only makes closures needs its `return` event alone)."""
        frame.f_trace_lines = id(frame.f_code) in self._lines
        frame.f_trace = self._local

    def _why_not(self, tid: int, frames: list[types.FrameType]) -> str | None:
        """Someone else traces (debugpy after a stop, coverage, a profiler's tracer): leave it be."""
        if sys.gettrace() is not None or threading.gettrace() is not None:
            return "the process is traced already"
        pydevd = sys.modules.get("pydevd")
        if pydevd is not None and getattr(pydevd, "get_global_debugger", lambda: None)() is not None:
            return "debugpy traces this process (3.11): its tracer would be replaced"
        top = sys._current_frames().get(tid)
        while top is not None:
            if top.f_trace is not None and not self._ours(top.f_trace):
                return "the thread is traced already"
            top = top.f_back
        low = tid & 0xFFFFFFFF  # the helper matches the thread id's low 32 bits
        if any(
            t != tid and t & 0xFFFFFFFF == low
            for t in set(sys._current_frames())
            | {t.ident for t in threading.enumerate() if t.ident is not None}
        ):
            return "two threads share the low bits of their ids"
        return None

    # --- traced threads ------------------------------------------------------------------

    def _on_call(self, frame, event, arg):
        """The traced thread's trace function: only code with armed lines gets line events."""
        try:
            if threading.get_ident() not in self._threads:
                sys.settrace(None)  # its armed frames are gone: full speed again
                return None
            return self._local if id(frame.f_code) in self._lines else None
        except Exception:  # noqa: BLE001 - never into user code
            swallow("the running-frame tracer at a call")
            return None

    def _on_released(self, frame, event, arg):
        """The thread was released while this frame ran: its trace function goes now."""
        try:
            frame.f_trace = None
            if sys.gettrace() is self._global:
                sys.settrace(None)
        except Exception:  # noqa: BLE001 - never into user code
            swallow("dropping the running-frame tracer")
        return None

    def _on_event(self, frame, event, arg):
        """`f_trace` of an armed frame: fire its armed lines; forget it when it returns."""
        try:
            if event == "line":
                entry = self._lines.get(id(frame.f_code))
                if entry is not None and frame.f_lineno in entry[1]:
                    self._fire(frame, frame.f_lineno)
                    if not self._ours(frame.f_trace):  # debugpy stopped here: the frame is its
                        self._threads.pop(threading.get_ident(), None)
            elif event == "return":
                tid = threading.get_ident()
                mine = self._threads.get(tid)
                if mine is not None and mine.pop(id(frame), None) is not None and not mine:
                    self._threads.pop(tid, None)
                    if sys.gettrace() is self._global:
                        sys.settrace(None)
        except Exception:  # noqa: BLE001 - never into user code
            swallow("the running-frame tracer at %s", event)
        # What the frame has now, not ourselves: the agent may have released this thread (or
        # debugpy taken the frame) while this ran; the trampoline stores what we return. No
        # instruction between this read and the return lets another thread run.
        return frame.f_trace


def _give_back(frame) -> None:
    frame.f_trace = None
    frame.f_trace_lines = True


def _stack_ids(frame) -> set[int]:
    out: set[int] = set()
    while frame is not None:
        out.add(id(frame))
        frame = frame.f_back
    return out
