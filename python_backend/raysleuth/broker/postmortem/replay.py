"""A read-only DAP session over a stored crash record (`attach {token, crash: ID}`).

Serves threads, stackTrace, scopes, variables, source and exceptionInfo from the record, so a
crash can be opened after its worker is gone. Values are the reprs stored at capture time:
nothing can run, so evaluate answers only with a stored local, and continue or step fail.
"""

from __future__ import annotations

import os

from raysleuth.model.crash import CrashRecord

THREAD_ID = 1
LOCALS_BASE = 1000
"""variablesReference of frame i's locals: LOCALS_BASE + i."""

GONE = "the process has exited; only stored values can be shown"
RUN_COMMANDS = frozenset(
    ("continue", "next", "stepIn", "stepOut", "stepBack", "reverseContinue", "pause", "goto", "restartFrame")
)
"""Requests that would run the worker: in a replay nothing runs."""
QUIET_EVALUATE = frozenset(("hover", "watch", "variables", "clipboard"))
"""Evaluate contexts whose failure the editor shows in place, never as an error toast."""
RAN_ON = (
    "the worker runs on (it was not held for an attach, or its hold ran out), so this is the crash's "
    "stored record; only stored values can be shown"
)
"""Said instead of GONE when the crashed worker is still alive (an actor lives on after a failed
method call; issue #13)."""


class Replay:
    def __init__(self, record: CrashRecord, worker_live: bool = False) -> None:
        self.rec = record
        self.why = RAN_ON if worker_live else GONE
        """Why only stored values can be shown: the worker is gone, or it ran on."""
        self.frames: list[dict] = [dict(f) for f in record.frames]
        self.sources: dict[str, str] = dict(record.sources)
        self._source_refs: dict[int, str] = {}
        self.label = record.label

    def description(self) -> str:
        msg = self.rec.message or ""
        return f"{self.label}: {msg}" if msg else self.label

    def _source(self, path: str) -> dict:
        src: dict = {"name": os.path.basename(path) or path, "path": path}
        if not os.path.isfile(path) and path in self.sources:
            ref = next((r for r, p in self._source_refs.items() if p == path), None)
            if ref is None:
                ref = len(self._source_refs) + 1
                self._source_refs[ref] = path
            src = {"name": src["name"], "sourceReference": ref, "origin": "stored with the crash record"}
        return src

    def stopped_event(self) -> dict:
        return {
            "reason": "exception",
            "threadId": THREAD_ID,
            "allThreadsStopped": True,
            "description": self.description(),
            "text": self.label,
        }

    def answer(self, command: str, args: dict) -> tuple[dict | None, str | None]:
        """(body, None) or (None, error message) for one request of a replay session. A command
        that would run code (continue, a step) answers success and leaves the scene as it is: the
        session says so and stops again (`RUN_COMMANDS`), so a click on the toolbar loses nothing."""
        if command in RUN_COMMANDS:
            return {"allThreadsContinued": False}, None
        if command == "threads":
            return {"threads": [{"id": THREAD_ID, "name": f"{self.label} (stored crash)"}]}, None
        if command == "stackTrace":
            start = int(args.get("startFrame") or 0)
            levels = int(args.get("levels") or 0) or len(self.frames)
            out = []
            for i, f in enumerate(self.frames[start : start + levels], start):
                out.append(
                    {
                        "id": i + 1,
                        "name": f.get("function") or "?",
                        "line": int(f.get("line") or 0),
                        "column": 1,
                        "source": self._source(f.get("path") or ""),
                    }
                )
            return {"stackFrames": out, "totalFrames": len(self.frames)}, None
        if command == "scopes":
            i = int(args.get("frameId") or 0) - 1
            if not 0 <= i < len(self.frames):
                return None, f"no frame {args.get('frameId')} in this crash record"
            return {
                "scopes": [
                    {
                        "name": "Locals",
                        "presentationHint": "locals",
                        "variablesReference": LOCALS_BASE + i,
                        "namedVariables": len(self.frames[i].get("locals") or {}),
                        "expensive": False,
                    }
                ]
            }, None
        if command == "variables":
            i = int(args.get("variablesReference") or 0) - LOCALS_BASE
            if not 0 <= i < len(self.frames):
                return {"variables": []}, None
            items = (self.frames[i].get("locals") or {}).items()
            return {
                "variables": [{"name": k, "value": str(v), "variablesReference": 0} for k, v in items]
            }, None
        if command == "source":
            ref = int(args.get("sourceReference") or 0)
            path = self._source_refs.get(ref) or (args.get("source") or {}).get("path")
            if path in self.sources:
                return {"content": self.sources[path], "mimeType": "text/x-python"}, None
            return None, f"the source of {path or 'this frame'} was not stored with the crash record"
        if command == "exceptionInfo":
            return {
                "exceptionId": self.label,
                "description": self.rec.message or "",
                "breakMode": "unhandled",
                "details": {
                    "message": self.rec.message or "",
                    "typeName": self.label,
                    "stackTrace": self.rec.traceback or self.rec.faulthandler or "",
                },
            }, None
        if command == "evaluate":
            expr = str(args.get("expression") or "").strip()
            i = int(args.get("frameId") or 1) - 1
            local = (self.frames[i].get("locals") or {}) if 0 <= i < len(self.frames) else {}
            if expr in local:
                return {"result": str(local[expr]), "variablesReference": 0}, None
            return None, f"Ray Sleuth: {self.why} (stored locals of this frame: {', '.join(local) or 'none'})"
        if command == "setBreakpoints":
            bps = args.get("breakpoints") or []
            return {
                "breakpoints": [
                    {"verified": False, "line": b.get("line"), "message": "read-only crash replay"}
                    for b in bps
                ]
            }, None
        if command in ("setExceptionBreakpoints", "setFunctionBreakpoints"):
            return {"breakpoints": []}, None
        if command in ("loadedSources",):
            return {"sources": [self._source(p) for p in self.sources]}, None
        return None, (
            f"Ray Sleuth: '{command}' cannot run in a read-only replay of crash {self.rec.id}: {self.why}."
        )
