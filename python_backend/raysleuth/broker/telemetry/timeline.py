"""The cluster's timeline and logpoint lines, as the broker keeps them (bounded, oldest dropped).

Timeline entries are `raysleuth.event()` records of every worker, crashes, and each pause of a
worker (`stopped` when the table first lists it paused, `resumed` when it no longer does); log
lines are what logpoints printed. Both are numbered (`seq`) so a client asks for what it has not seen.
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
        self._paused: dict[str, tuple[dict, float]] = {}
        """Worker id → (who, when the pause began) of the workers paused now."""

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

    def note_pauses(self, workers) -> None:
        """The worker table after a recompute: a `stopped` entry for each new pause (where and
        why), a `resumed` one (how long it lasted) for each that ended."""
        now = self.clock()
        paused = {w.id: w for w in workers if w.state == "paused"}
        for wid, w in paused.items():
            if wid not in self._paused:
                who = {"rank": w.rank, "worker": w.id, "pid": w.pid}
                since = w.paused_since or now
                self._paused[wid] = (who, since)
                self.add_event(who, "stopped", since, dict(w.paused_at or {}))
        for wid in [wid for wid in self._paused if wid not in paused]:
            who, since = self._paused.pop(wid)
            self.add_event(who, "resumed", now, {"seconds": round(max(0.0, now - since), 3)})

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
