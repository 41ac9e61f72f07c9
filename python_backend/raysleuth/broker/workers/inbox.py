"""Routes what agents send besides their reports: logpoint lines, timeline events, crash records,
snapshot rows and `raysleuth.inspect` summaries, each to the service that keeps it.
"""

from __future__ import annotations

import logging
import time

from raysleuth.shared.limits import MAX_LOG_LINE_CHARS

log = logging.getLogger(__name__)


class Inbox:
    def __init__(self, table, timeline, points, postmortem, hub, inspections=None) -> None:
        self.inspections = inspections
        """Inspections: the cross-rank tensor table (an `inspect` event's rows go there and the
        timeline keeps a light copy)."""
        self.table = table
        self.timeline = timeline
        self.points = points
        self.postmortem = postmortem
        self.hub = hub

    def route(self, item: dict) -> None:
        """One emitted item: {worker, kind, data}."""
        w = self.table.get(item.get("worker"))
        data = item.get("data") or {}
        rank = data.get("rank") if data.get("rank") is not None else (w.rank if w else None)
        who = {"rank": rank, "worker": item.get("worker"), "pid": data.get("pid") or (w.pid if w else None)}
        kind = item.get("kind")
        if kind == "log":
            self.timeline.add_log(who, dict(data, message=cut_line(data.get("message"))))
        elif kind == "events":
            for ev in data.get("items") or []:
                if not isinstance(ev, dict):
                    continue
                fields = ev.get("fields")
                if ev.get("name") == "inspect" and self.inspections is not None:
                    fields = self.inspections.add(who, ev)
                self.timeline.add_event(who, ev.get("name"), ev.get("t"), fields)
            if data.get("dropped"):
                self.timeline.add_event(who, "events_dropped", time.time(), {"count": data["dropped"]})
        elif kind == "crash":
            self.postmortem.add_crash(
                dict(data, worker=w.to_json() if w else {"id": item.get("worker"), **who})
            )
        elif kind == "snapshot":
            self._snapshot(who, data, w)
        elif kind == "rows":  # a divergence watch's rows, in a batch (issue 26)
            for one in data.get("items") or []:
                if isinstance(one, dict):
                    r = one.get("rank")
                    self._snapshot(dict(who, rank=rank if r is None else r), one, w)
            if data.get("dropped"):
                self.timeline.add_event(who, "watch_rows_dropped", time.time(), {"count": data["dropped"]})
        else:
            log.info("an agent sent an item of unknown kind %r", kind)

    def _snapshot(self, who: dict, data: dict, w) -> None:
        row = dict(who, time=data.get("time"), frames=data.get("frames") or [])
        if data.get("values"):
            row["values"] = data["values"]
        if isinstance(data.get("pass"), int):  # a divergence watch's pass (issue 26)
            row["pass"], row["step"] = data["pass"], data.get("step")
            row["job_id"] = w.job_id if w else None
            self.hub.emit("watch-row", (data.get("id"), row))
        elif self.points.add_row(data.get("id"), row):
            self.hub.publish("snapshot", {"id": data.get("id"), "row": row})


def cut_line(message) -> str:
    """A logpoint line as served: a string of at most MAX_LOG_LINE_CHARS (cut ones say so)."""
    text = message if isinstance(message, str) else str(message)
    if len(text) <= MAX_LOG_LINE_CHARS:
        return text
    return text[:MAX_LOG_LINE_CHARS] + f"... [{len(text) - MAX_LOG_LINE_CHARS} more characters cut]"
