"""The cluster's timeline and logpoint lines, as the broker keeps them (bounded, oldest dropped).

Timeline entries are `raysleuth.event()` records of every worker and crashes; log lines are what
logpoints printed. Both are numbered (`seq`) so a client asks for what it has not seen.
"""

from __future__ import annotations

import collections
import time

EVENTS_KEEP = 50_000
"""Timeline entries kept."""

LOGS_KEEP = 5000
"""Logpoint lines kept."""


class Timeline:
    def __init__(self, hub, clock=time.time) -> None:
        self.hub = hub
        self.clock = clock
        self.events: collections.deque = collections.deque(maxlen=EVENTS_KEEP)
        self.logs: collections.deque = collections.deque(maxlen=LOGS_KEEP)
        self._event_seq = 0
        self._log_seq = 0

    def add_event(self, who: dict, name, t, fields) -> dict:
        """One entry: {seq, time, name, rank, worker, pid, fields}."""
        self._event_seq += 1
        rec = {
            "seq": self._event_seq,
            "time": float(t) if isinstance(t, (int, float)) else self.clock(),
            "name": str(name),
            "rank": who.get("rank"),
            "worker": who.get("worker"),
            "pid": who.get("pid"),
            "fields": fields if isinstance(fields, dict) else {},
        }
        self.events.append(rec)
        return rec

    def add_log(self, who: dict, data: dict) -> dict:
        """One logpoint line, published on the stream as a `log` event."""
        self._log_seq += 1
        rec = dict(
            who, seq=self._log_seq, **{k: data.get(k) for k in ("path", "line", "message", "time", "point")}
        )
        if data.get("error"):
            rec["error"] = True
        self.logs.append(rec)
        self.hub.publish("log", rec)
        return rec

    def events_since(self, since: int, name: str | None = None) -> list[dict]:
        return [e for e in self.events if e["seq"] > since and (name is None or e["name"] == name)]

    def logs_since(self, since: int) -> list[dict]:
        return [r for r in self.logs if r["seq"] > since]
