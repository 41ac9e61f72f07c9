"""The light trigger: cluster breakpoints, logpoints and snapshot points armed inside a worker.

Only the code objects of files with points are touched, so the rest of the program runs at full
speed and a worker outside every scope pays nothing:

- Python 3.12+: `sys.monitoring` LINE events, set on those code objects only (`set_local_events`);
  every other line of them is switched off again with DISABLE at its first pass.
- Python 3.11: the functions' `__code__` is rewritten (the `bytecode` package) to call a hook at
  the first instruction of each armed line. Any `sys.settrace` would slow every line of the
  process 2-4.6x on 3.11; a rewritten function costs nothing until it reaches the line.

The hook evaluates scope, condition, hit count, logpoints and snapshot points itself and calls in
debugpy only when the worker must stop. A function that is running while it is armed (a loop in
progress) keeps its old code on 3.11 until it is entered again.

All of it runs inside user code: nothing here may raise into the task or print.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
import time
import types

from raysleuth.agent.capture import bounded_repr, capture_frames
from raysleuth.model.scope import Scope

LOG_RATE = 50
"""Logpoint lines per point per second; more are counted and reported as dropped."""


class HitCondition:
    """DAP hitCondition as debugpy reads it: `5` (the 5th hit), `>5`, `>=5`, `<5`, `<=5`, `==5`, `%5`."""

    OPS = (">=", "<=", "==", ">", "<", "%")

    def __init__(self, text: str) -> None:
        t = text.strip()
        op = next((o for o in self.OPS if t.startswith(o)), "==")
        num = t[len(op) :].strip() if t.startswith(op) else t
        self.op, self.n = op, int(num)  # ValueError on nonsense: the broker checks it first
        if self.op == "%" and self.n <= 0:
            raise ValueError("% needs a positive number")

    def __call__(self, hits: int) -> bool:
        n, op = self.n, self.op
        if op == "%":
            return hits % n == 0
        return {">=": hits >= n, "<=": hits <= n, "==": hits == n, ">": hits > n, "<": hits < n}[op]


class Point:
    """One armed point in this worker (a copy of the cluster's spec with its own hit count)."""

    __slots__ = (
        "id",
        "kind",
        "path",
        "rel",
        "line",
        "scope",
        "cond",
        "hit",
        "log",
        "count",
        "hits",
        "fired",
        "dead",
        "error",
        "log_second",
        "log_sent",
        "log_dropped",
        "snapshot",
    )

    def __init__(self, spec: dict) -> None:
        self.id = spec["id"]
        self.kind = spec.get("kind", "break")
        self.path = os.path.normpath(spec["path"])
        self.rel = spec.get("rel")
        self.line = int(spec["line"])
        self.scope = Scope.from_json(spec.get("scope"))
        cond = spec.get("rest")
        self.cond = compile(cond, "<condition>", "eval") if cond else None
        hc = spec.get("hitCondition")
        self.hit = HitCondition(hc) if hc else None
        self.log = spec.get("logMessage") or None
        if self.log and self.kind == "break":
            self.kind = "log"
        self.count = int(spec.get("count") or 0)
        self.snapshot = spec.get("snapshot")
        self.hits = 0
        self.fired = 0
        self.dead = False
        self.error: str | None = None
        self.log_second = 0
        self.log_sent = 0
        self.log_dropped = 0

    def matches_file(self, filename: str) -> bool:
        f = os.path.normpath(filename)
        if f == self.path:
            return True
        return bool(self.rel) and f.endswith(os.sep + self.rel)


def format_log(message: str, frame) -> str:
    """Interpolate `{expression}` parts of a logpoint message in the frame (`{{` is a brace)."""
    out: list[str] = []
    i, n = 0, len(message)
    while i < n:
        c = message[i]
        if c == "{" and message.startswith("{{", i):
            out.append("{")
            i += 2
        elif c == "}" and message.startswith("}}", i):
            out.append("}")
            i += 2
        elif c == "{":
            j = message.find("}", i + 1)
            if j < 0:
                out.append(message[i:])
                break
            expr = message[i + 1 : j]
            try:
                value = eval(expr, frame.f_globals, frame.f_locals)  # noqa: S307 - the user's own logpoint
                s = value if isinstance(value, str) else bounded_repr(value)
            except Exception as exc:  # noqa: BLE001
                s = f"<{type(exc).__name__}: {exc}>"
            out.append(s[:1000])
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


# --- finding the code of a file ------------------------------------------------------------


def _nested_codes(code: types.CodeType):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _nested_codes(const)


def _code_lines(code: types.CodeType) -> set[int]:
    return {line for _s, _e, line in code.co_lines() if line is not None}


def functions_in(obj, seen: set[int], depth: int = 0):
    """Functions reachable from a class or function (methods, properties, static/class methods)."""
    if id(obj) in seen or depth > 4:
        return
    seen.add(id(obj))
    if isinstance(obj, types.FunctionType):
        yield obj
    elif isinstance(obj, (staticmethod, classmethod)):
        yield from functions_in(obj.__func__, seen, depth + 1)
    elif isinstance(obj, property):
        for f in (obj.fget, obj.fset, obj.fdel):
            if f is not None:
                yield from functions_in(f, seen, depth + 1)
    elif isinstance(obj, type):
        for value in list(vars(obj).values()):
            yield from functions_in(value, seen, depth + 1)
    wrapped = getattr(obj, "__wrapped__", None) if not isinstance(obj, type) else None
    if wrapped is not None:
        yield from functions_in(wrapped, seen, depth + 1)


# --- backends ---------------------------------------------------------------------------------


class RewriteBackend:
    """Python 3.11 and older: swap in a copy of the function's code that calls the hook at a line."""

    name = "rewrite"

    def __init__(self, hook) -> None:
        self._hook = hook
        self._swapped: dict[int, tuple[types.FunctionType, types.CodeType]] = {}
        """id(function) → (function, its original code)."""
        self._cache: dict[tuple, types.CodeType] = {}
        self._old: dict[int, tuple[types.FunctionType, types.CodeType]] = {}
        """During a re-arm: what was swapped before it (restored at the end where not armed again)."""

    def original(self, fn) -> types.CodeType:
        rec = self._swapped.get(id(fn)) or self._old.get(id(fn))
        return rec[1] if rec is not None and rec[0] is fn else fn.__code__

    def rearm_begin(self) -> None:
        """Start arming a new set without first disarming the old one: a function called while
        the set is rebuilt runs instrumented code (old or new), never its bare original."""
        self._old = {**self._old, **self._swapped}
        self._swapped = {}
        self._cache.clear()

    def rearm_end(self) -> None:
        """Give back their original code to the functions the new set did not arm."""
        for key, (fn, code) in self._old.items():
            if key not in self._swapped:
                try:
                    fn.__code__ = code
                except Exception:  # noqa: BLE001
                    pass
        self._old = {}

    def arm(self, fn, lines: frozenset) -> bool:
        code = self.original(fn)
        new = self._instrument(code, lines)
        if new is code:
            return False
        if fn.__code__ is not new:
            self._swapped[id(fn)] = (fn, code)
            fn.__code__ = new
        return True

    def disarm_all(self) -> None:
        self._swapped = {**self._old, **self._swapped}
        self._old = {}
        for fn, code in self._swapped.values():
            try:
                fn.__code__ = code
            except Exception:  # noqa: BLE001
                pass
        self._swapped.clear()
        self._cache.clear()

    def _instrument(self, code: types.CodeType, lines: frozenset) -> types.CodeType:
        key = (code, lines)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        if not any(lines & _code_lines(c) for c in _nested_codes(code)):
            self._cache[key] = code
            return code
        import bytecode

        bc = bytecode.Bytecode.from_code(code)
        out = []
        started = False
        last_line = None
        for ins in bc:
            if isinstance(ins, bytecode.Instr):
                if ins.name == "LOAD_CONST" and isinstance(ins.arg, types.CodeType):
                    ins = bytecode.Instr(
                        "LOAD_CONST", self._instrument(ins.arg, lines), location=ins.location
                    )
                line = ins.lineno
                if started and line in lines and line != last_line:
                    out.extend(self._call_hook(bytecode, line, ins.location))
                if ins.name == "RESUME":
                    started = True
                if isinstance(line, int):
                    last_line = line
            out.append(ins)
        bc.clear()
        bc.extend(out)
        new = bc.to_code()
        self._cache[key] = new
        return new

    def _call_hook(self, bytecode, line: int, location):
        instr = bytecode.Instr
        if sys.version_info >= (3, 11):
            return [
                instr("PUSH_NULL", location=location),
                instr("LOAD_CONST", self._hook, location=location),
                instr("LOAD_CONST", line, location=location),
                instr("PRECALL", 1, location=location),
                instr("CALL", 1, location=location),
                instr("POP_TOP", location=location),
            ]
        return [  # 3.10
            instr("LOAD_CONST", self._hook, lineno=line),
            instr("LOAD_CONST", line, lineno=line),
            instr("CALL_FUNCTION", 1, lineno=line),
            instr("POP_TOP", lineno=line),
        ]


class MonitoringBackend:
    """Python 3.12+: LINE events on the armed code objects only, through our own tool id."""

    name = "monitoring"
    _instance: MonitoringBackend | None = None

    @classmethod
    def shared(cls, on_line) -> MonitoringBackend:
        """One tool id per process: claim it once, point its callback at the current trigger."""
        inst = cls._instance
        if inst is None:
            inst = cls._instance = cls(on_line)
        else:
            inst.disarm_all()
            sys.monitoring.register_callback(inst.tool, sys.monitoring.events.LINE, on_line)
        return inst

    def __init__(self, on_line) -> None:
        mon = sys.monitoring
        self._mon = mon
        self.tool = None
        for tool in (4, 3, 5, 2):
            if mon.get_tool(tool) is None:
                mon.use_tool_id(tool, "raysleuth")
                self.tool = tool
                break
        if self.tool is None:
            raise RuntimeError("no free sys.monitoring tool id")
        mon.register_callback(self.tool, mon.events.LINE, on_line)
        self._codes: set[types.CodeType] = set()
        self._old: set[types.CodeType] = set()
        """During a re-arm: the codes armed before it (switched off at the end where not armed again)."""

    def rearm_begin(self) -> None:
        """Start arming a new set with the old one still on: code that runs during the rescan
        keeps its LINE events (the hook reads the old table until the new one is whole)."""
        self._old |= self._codes
        self._codes = set()

    def rearm_end(self) -> None:
        for code in self._old - self._codes:
            try:
                self._mon.set_local_events(self.tool, code, 0)
            except Exception:  # noqa: BLE001
                pass
        self._old = set()

    def arm(self, fn, lines: frozenset) -> bool:
        armed = False
        for code in _nested_codes(fn.__code__):
            if code in self._codes:
                armed = True
                continue
            if lines & _code_lines(code):
                if code not in self._old:  # still on from the set before: nothing to switch
                    self._mon.set_local_events(self.tool, code, self._mon.events.LINE)
                self._codes.add(code)
                armed = True
        return armed

    def disarm_all(self) -> None:
        for code in self._codes | self._old:
            try:
                self._mon.set_local_events(self.tool, code, 0)
            except Exception:  # noqa: BLE001
                pass
        self._codes.clear()
        self._old = set()

    def restart(self) -> None:
        self._mon.restart_events()  # lines switched off by DISABLE fire again


def use_monitoring() -> bool:
    forced = os.environ.get("RAYSLEUTH_TRIGGER")
    if forced:
        return forced == "monitoring"
    return sys.version_info >= (3, 12)


class Trigger:
    """This worker's armed points. Armed from the agent thread; the hook runs in user threads."""

    def __init__(self, agent) -> None:
        self.agent = agent
        self._lock = threading.RLock()
        self._local = threading.local()
        self.points: list[Point] = []
        self._by_file: dict[str, dict[int, list[Point]]] = {}
        self._live_by_file: dict[str, dict[int, list[Point]]] = self._by_file
        """What the hooks read: the table being rebuilt by update() replaces it only when whole,
        so a function already running in instrumented code keeps firing during a re-arm."""
        """co_filename → line → points, for files the scan found."""
        self._file_points: dict[str, list[Point]] = {}
        """co_filename → points of that file (empty list: checked, none)."""
        self.armed: set[str] = set()
        """Ids of points whose code was found and instrumented."""
        self.errors: dict[str, str] = {}
        self.backend = None
        self.scan_ms = 0.0
        self.scanned_modules: set[str] = set()

    # --- arming (agent thread) ------------------------------------------------------------

    def _ensure_backend(self):
        if self.backend is None:
            if use_monitoring():
                self.backend = MonitoringBackend.shared(self._on_line)
            else:
                self.backend = RewriteBackend(self._hook)
        return self.backend

    def update(self, specs: list[dict], identity: dict) -> None:
        """Arm the points whose scope can match this worker; disarm everything else."""
        points: list[Point] = []
        errors: dict[str, str] = {}
        old = {p.id: p for p in self.points}
        for spec in specs:
            try:
                p = Point(spec)
            except Exception as exc:  # noqa: BLE001 - the broker validates; be safe anyway
                errors[str(spec.get("id"))] = f"{type(exc).__name__}: {exc}"
                continue
            prev = old.get(p.id)
            if prev is not None:  # same point again: keep its counts
                p.hits, p.fired, p.dead = prev.hits, prev.fired, prev.dead
            if p.dead or p.scope.match(identity) is False:
                continue
            points.append(p)
        with self._lock:
            self.points = points
            self.errors = errors
            self._file_points = {}
            self._by_file = {}
            self.scanned_modules = set()
            backend = self.backend
            if backend is not None:
                backend.rearm_begin()  # the old set stays on until the new one is armed
            self.armed = set()
            try:
                if points:
                    self._ensure_backend()
                    t0 = time.perf_counter()
                    self._scan(gc.get_objects())
                    self.scan_ms = (time.perf_counter() - t0) * 1000
            finally:
                if backend is not None:
                    backend.rearm_end()
                self._live_by_file = self._by_file
            if points and isinstance(self.backend, MonitoringBackend):
                # After the switch: a line the old table had no point for, switched off by the
                # callback during the scan, fires again now.
                self.backend.restart()

    def points_for_file(self, filename: str) -> list[Point]:
        pts = self._file_points.get(filename)
        if pts is None:
            pts = [p for p in self.points if p.matches_file(filename)]
            self._file_points[filename] = pts
        return pts

    def _scan(self, objects) -> None:
        for obj in objects:
            if type(obj) is types.FunctionType:
                self._arm_function(obj)

    def _arm_function(self, fn) -> None:
        backend = self.backend
        code = backend.original(fn) if isinstance(backend, RewriteBackend) else fn.__code__
        pts = self.points_for_file(code.co_filename)
        if not pts:
            return
        lines = frozenset(p.line for p in pts)
        try:
            if not backend.arm(fn, lines):
                return
        except Exception as exc:  # noqa: BLE001
            self.agent.log.warning("arming %s failed: %s", fn.__qualname__, exc)
            return
        all_lines = set().union(*(_code_lines(c) for c in _nested_codes(code)))
        table = self._by_file.setdefault(code.co_filename, {})
        for p in pts:
            if p.line in all_lines:
                table.setdefault(p.line, [])
                if p not in table[p.line]:
                    table[p.line].append(p)
                self.armed.add(p.id)

    def code_loaded(self, obj) -> bool:
        """A class or function Ray just loaded (or a module just imported): arm what is in it."""
        with self._lock:
            if not self.points:
                return False
            before = len(self.armed)
            if isinstance(obj, types.ModuleType):
                objs = list(vars(obj).values())
            elif isinstance(obj, types.FunctionType):
                # A function pickled by value carries the helpers it calls in its globals.
                objs = [obj] + [
                    v for v in list(obj.__globals__.values()) if isinstance(v, (type, types.FunctionType))
                ]
            else:
                objs = [obj]
            seen: set[int] = set()
            for o in objs:
                for fn in functions_in(o, seen):
                    self._arm_function(fn)
            if isinstance(self.backend, MonitoringBackend):
                self.backend.restart()
            return len(self.armed) != before

    def disarm_all(self) -> None:
        self.update([], {})

    # --- hitting (user threads) -----------------------------------------------------------

    def _hook(self, line: int) -> None:
        """Called by rewritten code (3.11) at the first instruction of an armed line."""
        try:
            frame = sys._getframe(1)
            pts = self._live_by_file.get(frame.f_code.co_filename, {}).get(line)
            if pts:
                self._hit(frame, pts)
        except Exception:  # noqa: BLE001 - never into user code
            pass

    def _on_line(self, code, line):
        """sys.monitoring LINE callback (3.12+)."""
        pts = self._live_by_file.get(code.co_filename, {}).get(line)
        if not pts:
            return sys.monitoring.DISABLE
        try:
            self._hit(sys._getframe(1), pts)
        except Exception:  # noqa: BLE001
            pass
        return None

    def _hit(self, frame, pts: list[Point]) -> None:
        local = self._local
        if getattr(local, "busy", False):
            return  # a condition or a repr that runs armed code: no recursion
        local.busy = True
        try:
            for p in list(pts):
                if not p.dead:
                    self._fire(p, frame)
        finally:
            local.busy = False

    def _fire(self, p: Point, frame) -> None:
        agent = self.agent
        if not p.scope.is_all():
            m = p.scope.match(agent.identity())
            if m is False:
                p.dead = True  # its rank rules it out now: disarmed at the next heartbeat
                agent.rearm_soon()
                return
            if m is None:
                return  # rank not known yet
        if p.cond is not None:
            try:
                if not eval(p.cond, frame.f_globals, frame.f_locals):  # noqa: S307 - the user's condition
                    return
            except Exception as exc:  # noqa: BLE001
                self._point_error(p, frame, f"condition raised {type(exc).__name__}: {exc}")
                return
        p.hits += 1
        if p.hit is not None and not p.hit(p.hits):
            return
        if p.kind == "log":
            self._log(p, frame)
        elif p.kind == "snapshot":
            p.fired += 1
            if p.count and p.fired >= p.count:
                p.dead = True
                agent.rearm_soon()
            agent.emit(
                "snapshot",
                {
                    "id": p.snapshot,
                    "point": p.id,
                    "time": time.time(),
                    "frames": capture_frames(frame),
                },
            )
        else:
            p.fired += 1
            stop_here(agent, frame, p)

    def _log(self, p: Point, frame) -> None:
        now = int(time.monotonic())
        if now != p.log_second:
            if p.log_dropped:
                self.agent.emit(
                    "log", self._log_record(p, frame, f"… {p.log_dropped} lines dropped (rate limit)")
                )
            p.log_second, p.log_sent, p.log_dropped = now, 0, 0
        if p.log_sent >= LOG_RATE:
            p.log_dropped += 1
            return
        p.log_sent += 1
        self.agent.emit("log", self._log_record(p, frame, format_log(p.log, frame)))

    def _log_record(self, p: Point, frame, message: str) -> dict:
        return {
            "point": p.id,
            "path": frame.f_code.co_filename,
            "line": frame.f_lineno,
            "message": message,
            "time": time.time(),
        }

    def _point_error(self, p: Point, frame, message: str) -> None:
        if p.error is None:  # once per point, not once per pass
            p.error = message
            self.agent.emit("log", dict(self._log_record(p, frame, message), error=True))


# --- stopping: hand over to debugpy ---------------------------------------------------------

_resume_events: set[threading.Event] = set()
"""One per thread waiting for a debugger in stop_here(); set by `resume_waiting()`."""


def resume_waiting() -> int:
    """Let every thread that waits for a debugger go on without one ("Continue all paused")."""
    evs = list(_resume_events)
    for ev in evs:
        resume_one(ev)  # pydevd sets the event itself once a client is there: tell them apart
    return len(evs)


def _debugpy_will_stop(frame, line: int) -> bool:
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
    except Exception:  # noqa: BLE001
        return False
    return False


def stop_here(agent, frame, point: Point | None) -> None:
    """Stop this thread at `frame` in debugpy, waiting for a client (the broker) first."""
    from raysleuth.agent import breakpoint as bp_mod
    from raysleuth.agent import commands

    line = frame.f_lineno
    if _debugpy_will_stop(frame, line):
        return
    try:
        commands.open_listener()
    except Exception:  # noqa: BLE001
        agent.log.exception("opening the debugger for a breakpoint failed")
        return
    bp_mod.paused_at = {
        "path": frame.f_code.co_filename,
        "line": line,
        "reason": "breakpoint",
        "breakpoint": point.id if point is not None else None,
    }
    bp_mod.paused_thread = threading.get_ident()
    agent.poke()
    try:
        if _wait_for_client():
            _suspend(frame)
    except Exception:  # noqa: BLE001
        agent.log.exception("stopping in debugpy failed")
    finally:
        bp_mod.paused_at = None
        bp_mod.paused_thread = None
        agent.poke()


def _wait_for_client(timeout: float | None = None) -> bool:
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
    ev.resumed = True
    ev.set()


def _suspend(frame) -> None:
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
