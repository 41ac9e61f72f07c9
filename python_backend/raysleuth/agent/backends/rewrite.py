"""Python 3.11 backend: swap in a copy of the function's code that calls the hook at a line.

Any `sys.settrace` slows every line of the process 2-4.6x on 3.11; a rewritten function costs
nothing until it reaches the armed line. A function running while it is armed (a loop in
progress) keeps its old code until it is entered again: agent/running.py traces such frames until
they return. Uses the `bytecode` package, imported only when the first function is rewritten.
"""

from __future__ import annotations

import functools
import sys
import types
import weakref

from raysleuth.agent.codes import code_lines, nested_codes
from raysleuth.agent.log import swallow


class RewriteBackend:
    """Rewritten `__code__` per armed function; the hook is a constant in the new code."""

    name = "rewrite"

    def __init__(self, hook) -> None:
        self._hook = hook
        self._swapped: dict[int, tuple[types.FunctionType, types.CodeType]] = {}
        """id(function) → (function, its original code)."""
        self._cache: dict[tuple, types.CodeType] = {}
        """(original code, armed lines) → its instrumented copy (the code itself: nothing to do)."""
        self._old: dict[int, tuple[types.FunctionType, types.CodeType]] = {}
        """During a re-arm: what was swapped before it (restored at the end where not armed again)."""
        self._hooked: dict[int, tuple[weakref.ref, frozenset]] = {}
        """id() of every instrumented code object made (outliving re-arms) → (a weak reference
        to it, the lines it was made for): a frame still running one of them calls the hook
        there itself. By identity: code objects compare equal by value, and a copy made again
        after a re-arm equals the one before, which may die first."""

    def original(self, fn) -> types.CodeType:
        """The function's own code, whether it runs a rewritten copy now or not."""
        rec = self._swapped.get(id(fn)) or self._old.get(id(fn))
        return rec[1] if rec is not None and rec[0] is fn else fn.__code__

    def hooked_lines(self, code: types.CodeType) -> frozenset:
        """The lines at which `code` calls the hook itself (none: it is not a rewritten copy)."""
        rec = self._hooked.get(id(code))
        return rec[1] & code_lines(code) if rec is not None and rec[0]() is code else frozenset()

    def originals(self) -> list[types.CodeType]:
        """The original code of every function armed now (frames may still run it)."""
        return [code for _fn, code in list(self._swapped.values())]

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
                    swallow("giving %s its original code back", getattr(fn, "__qualname__", fn))
        self._old = {}

    def restart(self) -> None:
        """Nothing to do: rewritten code calls the hook on every pass (sys.monitoring's DISABLE
        has no counterpart here)."""

    def arm(self, fn, lines: frozenset) -> bool:
        """Swap in code that calls the hook at `lines`; False when `fn` has none of them."""
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
                swallow("giving %s its original code back", getattr(fn, "__qualname__", fn))
        self._swapped.clear()
        self._cache.clear()

    def _instrument(self, code: types.CodeType, lines: frozenset) -> types.CodeType:
        key = (code, lines)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        if not any(lines & code_lines(c) for c in nested_codes(code)):
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
                if started and isinstance(line, int) and line in lines and line != last_line:
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
        ident = id(new)
        self._hooked[ident] = (weakref.ref(new, functools.partial(self._forget, ident)), lines)
        return new

    def _forget(self, key: int, ref: weakref.ref) -> None:
        """An instrumented copy died (whichever thread dropped it): forget its lines."""
        rec = self._hooked.get(key)
        if rec is not None and rec[0] is ref:
            del self._hooked[key]

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
