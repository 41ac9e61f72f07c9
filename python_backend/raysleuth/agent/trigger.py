"""The light trigger: cluster breakpoints, logpoints and snapshot points armed inside a worker.

Only the code objects of files with points are touched (`backends/`: sys.monitoring on 3.12+,
rewritten `__code__` on 3.11), so the rest of the program runs at full speed and a worker outside
every scope pays nothing. This module arms: it builds a point table (`points.py`), finds the code
of its files and instruments it; `hits.py` decides what an armed line does when it runs. On 3.11
a frame already running the old code is traced until it returns (`running.py`); sys.monitoring
covers running frames by itself.

Arming runs in the agent thread (or Ray's loading thread); the hooks run in user threads and
never raise into the task or print.
"""

from __future__ import annotations

import gc
import sys
import threading
import time
import types
from typing import TYPE_CHECKING

from raysleuth.agent.backends import make_backend
from raysleuth.agent.codes import all_lines, code_lines, functions_in, loaded_objects, nested_codes
from raysleuth.agent.hits import Hits
from raysleuth.agent.log import swallow
from raysleuth.agent.points import ArmedPoint, PointTable
from raysleuth.agent.running import RunningFrames

if TYPE_CHECKING:
    from raysleuth.agent.backends import Backend
    from raysleuth.agent.port import AgentPort


class Trigger:
    """This worker's armed points. Armed from the agent thread; the hook runs in user threads."""

    def __init__(self, agent: AgentPort) -> None:
        self.agent = agent
        self._lock = threading.RLock()
        self._hit = Hits(agent).hit
        """Bound once: the hooks call it on every pass of an armed line."""
        self._table = PointTable()
        """The set being armed, or armed: what `update()` and `code_loaded()` add to."""
        self._live: dict[str, dict[int, list[ArmedPoint]]] = self._table.lines
        """What the hooks read: the table being rebuilt by update() replaces it only when whole,
        so a function already running in instrumented code keeps firing during a re-arm."""
        self.backend: Backend | None = None
        """The instrumentation backend, created with the first point."""
        self.scan_ms = 0.0
        """How long the last full scan of the heap took."""
        self.running: RunningFrames | None = None
        """Frames running old code when their points were armed (rewrite backend only)."""

    @property
    def points(self) -> list[ArmedPoint]:
        return self._table.points

    @property
    def armed(self) -> set[str]:
        return self._table.armed

    @property
    def errors(self) -> dict[str, str]:
        return self._table.errors

    @property
    def scanned_modules(self) -> set[str]:
        return self._table.scanned_modules

    # --- arming (agent thread) ------------------------------------------------------------

    def _ensure_backend(self) -> Backend:
        if self.backend is None:
            self.backend = make_backend(self._hook, self._on_line)
        return self.backend

    def update(self, specs: list[dict], identity: dict, heap: bool = True) -> None:
        """Arm the points whose scope can match this worker; disarm everything else.

        `heap=False` looks only through the modules whose file has a point and the functions
        rebuilt from pickles, not the whole heap: a worker's first task arms so (what it runs
        arrives later, through the load hooks), and the agent thread scans the heap after.

        The order matters (a worker's code runs meanwhile): the old set stays instrumented while
        the new one is armed, the hooks switch to the new table only once it is whole, and only
        then is code the new set does not need given back.
        """
        table = PointTable.build(specs, identity, self._table)
        with self._lock:
            self._table = table
            backend = self.backend
            if backend is not None:
                backend.rearm_begin()  # the old set stays on until the new one is armed
            try:
                if table.points:
                    self._ensure_backend()
                    t0 = time.perf_counter()
                    self._scan(self._heap() if heap else self._modules_with_points())
                    self.scan_ms = (time.perf_counter() - t0) * 1000
            finally:
                if backend is not None:
                    backend.rearm_end()
                self._live = table.lines
            if table.points:
                # After the switch: a line the old table had no point for, switched off by the
                # callback during the scan, fires again now (sys.monitoring).
                self._ensure_backend().restart()
            self._arm_running()

    def points_for_file(self, filename: str) -> list[ArmedPoint]:
        return self._table.points_for_file(filename)

    def _heap(self) -> list:
        """What the full scan looks through: every object the collector tracks, and, in a
        process that called `gc.freeze()` (Ray Serve's replicas do, once started), the functions
        that hides: those of modules with points and those rebuilt from pickles."""
        objects = gc.get_objects()
        if gc.get_freeze_count():
            objects.extend(self._modules_with_points())
        return objects

    def _modules_with_points(self) -> list:
        """The functions of loaded modules whose file has a point, and those rebuilt from
        pickles: what a worker that ran none of its tasks yet can call."""
        from raysleuth.agent import datahook

        seen: set[int] = set()
        objects: list = list(datahook.rebuilt)
        for mod in list(sys.modules.values()):
            f = getattr(mod, "__file__", None)
            if f and not initializing(mod) and self._table.points_for_file(f):
                self._table.scanned_modules.add(f)
                for o in loaded_objects(mod):
                    objects.extend(functions_in(o, seen))
        return objects

    def _scan(self, objects) -> None:
        for obj in objects:
            if type(obj) is types.FunctionType:
                self._arm_function(obj)

    def _arm_function(self, fn) -> None:
        backend = self._ensure_backend()
        code = backend.original(fn)
        table = self._table
        pts = table.points_for_file(code.co_filename)
        if not pts:
            return
        try:
            if not backend.arm(fn, frozenset(p.line for p in pts)):
                return
        except Exception as exc:  # noqa: BLE001
            self.agent.log.warning("arming %s failed: %s", fn.__qualname__, exc)
            return
        table.add(code.co_filename, pts, all_lines(code))

    def code_loaded(self, obj) -> bool:
        """A class or function Ray just loaded (or a module just imported): arm what is in it."""
        with self._lock:
            table = self._table
            if not table.points or self.backend is None:
                return False
            before = len(table.armed)
            seen: set[int] = set()
            for o in loaded_objects(obj):
                for fn in functions_in(o, seen):
                    self._arm_function(fn)
            self.backend.restart()
            return len(table.armed) != before

    def arm_new_modules(self) -> bool:
        """Modules imported since the last look whose file has a point not armed yet."""
        with self._lock:
            table = self._table
            missing = table.missing()
            changed = False
            if not missing:
                return changed
            for mod in list(sys.modules.values()):
                f = getattr(mod, "__file__", None)
                if not f or f in table.scanned_modules or initializing(mod):
                    continue  # one still running its body is looked through once it is done
                if any(p.matches_file(f) for p in missing):
                    table.scanned_modules.add(f)
                    changed = self.code_loaded(mod) or changed
            if changed:
                self._arm_running()
            return changed

    def disarm_all(self) -> None:
        self.update([], {})

    def _arm_running(self) -> None:
        """Rewrite backend: frames running code that does not call the hook at their armed
        lines (they started before it was armed) fire through a tracer until they return."""
        from raysleuth.agent.backends.rewrite import RewriteBackend

        backend = self.backend
        if not isinstance(backend, RewriteBackend):
            return  # sys.monitoring instruments running frames too
        table = self._table
        if not table.points and self.running is None:
            return
        if self.running is None:
            self.running = RunningFrames(self._fire_line)

        def want(code) -> set[int]:
            pts = table.points_for_file(code.co_filename)
            if not pts:
                return set()
            lines = {p.line for p in pts} & code_lines(code)
            lines -= backend.hooked_lines(code)
            if lines:
                table.add(code.co_filename, pts, lines)
            return lines

        stale = [c for code in backend.originals() for c in nested_codes(code)] if table.points else []
        try:
            self.running.arm(want if table.points else (lambda code: ()), stale)
        except Exception:  # noqa: BLE001 - running frames then fire from their next call on
            swallow("arming the frames running now")

    # --- hitting (user threads) -----------------------------------------------------------

    def _hook(self, line: int) -> None:
        """Called by rewritten code (3.11) at the first instruction of an armed line."""
        try:
            self._fire_line(sys._getframe(1), line)
        except Exception:  # noqa: BLE001 - never into user code
            swallow("the line hook at line %s", line)

    def _fire_line(self, frame, line: int) -> None:
        """An armed line runs in `frame` (rewritten code's hook, or a running frame's tracer)."""
        pts = self._live.get(frame.f_code.co_filename, {}).get(line)
        if pts:
            self._hit(frame, pts)

    def _on_line(self, code, line):
        """sys.monitoring LINE callback (3.12+)."""
        pts = self._live.get(code.co_filename, {}).get(line)
        if not pts:
            return sys.monitoring.DISABLE
        try:
            self._hit(sys._getframe(1), pts)
        except Exception:  # noqa: BLE001 - never into user code
            swallow("the line hook at %s:%s", code.co_filename, line)
        return None


def initializing(module) -> bool:
    """Whether `module` is in `sys.modules` but still running its body (another thread imports it:
    importlib marks its spec until the body is done); its functions may not exist yet."""
    return bool(getattr(getattr(module, "__spec__", None), "_initializing", False))
