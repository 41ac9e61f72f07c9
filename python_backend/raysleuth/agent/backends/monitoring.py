"""Python 3.12+ backend: `sys.monitoring` LINE events on the armed code objects only.

Every other line of those code objects is switched off with DISABLE at its first pass, so only
the armed lines call back. One tool id per process, claimed once and kept. `set_local_events`
instruments the code object in place, so a frame running it already (a loop in progress) calls
back at its next armed line too (tests/python/unit/test_agent_running.py).
"""

from __future__ import annotations

import sys
import types

from raysleuth.agent.codes import code_lines, nested_codes
from raysleuth.agent.log import swallow


class MonitoringBackend:
    """LINE events through our own tool id, set per code object (`set_local_events`)."""

    name = "monitoring"
    _instance: MonitoringBackend | None = None
    """The process's one backend (its tool id cannot be claimed twice)."""

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
        free = [t for t in (4, 3, 5, 2) if mon.get_tool(t) is None]
        if not free:
            raise RuntimeError("no free sys.monitoring tool id")
        self.tool: int = free[0]
        mon.use_tool_id(self.tool, "raysleuth")
        mon.register_callback(self.tool, mon.events.LINE, on_line)
        self._codes: dict[int, types.CodeType] = {}
        """Code objects with LINE events on for the current set."""
        self._old: dict[int, types.CodeType] = {}
        """During a re-arm: the codes armed before it (switched off at the end where not armed again)."""

    def original(self, fn) -> types.CodeType:
        """The function's code (this backend never replaces it)."""
        return fn.__code__

    def rearm_begin(self) -> None:
        """Start arming a new set with the old one still on: code that runs during the rescan
        keeps its LINE events (the hook reads the old table until the new one is whole)."""
        self._old = {**self._old, **self._codes}
        self._codes = {}

    def rearm_end(self) -> None:
        for key, code in self._old.items():
            if key in self._codes:
                continue
            try:
                self._mon.set_local_events(self.tool, code, 0)
            except Exception:  # noqa: BLE001
                swallow("switching off LINE events of %s", code.co_qualname)
        self._old = {}

    def arm(self, fn, lines: frozenset) -> bool:
        """LINE events on every code object of `fn` that has one of `lines`; False if none has."""
        armed = False
        for code in nested_codes(fn.__code__):
            if id(code) in self._codes:  # identity: an equal copy (from a pickle) is another code
                armed = True
                continue
            if lines & code_lines(code):
                if id(code) not in self._old:  # still on from the set before: nothing to switch
                    self._mon.set_local_events(self.tool, code, self._mon.events.LINE)
                self._codes[id(code)] = code
                armed = True
        return armed

    def disarm_all(self) -> None:
        for code in {**self._old, **self._codes}.values():
            try:
                self._mon.set_local_events(self.tool, code, 0)
            except Exception:  # noqa: BLE001
                swallow("switching off LINE events of %s", code.co_qualname)
        self._codes.clear()
        self._old = {}

    def restart(self) -> None:
        """Lines switched off by DISABLE fire again (after the hooks read a new table)."""
        self._mon.restart_events()
