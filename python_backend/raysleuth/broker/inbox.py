"""Routes what agents send besides their reports: logpoint lines, timeline events, crash records
and snapshot rows, each to the service that keeps it.
"""

from __future__ import annotations

import logging
import time

log = logging.getLogger(__name__)


class Inbox:
    def __init__(self, table, timeline, points, postmortem, hub) -> None:
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
            self.timeline.add_log(who, data)
        elif kind == "events":
            for ev in data.get("items") or []:
                if isinstance(ev, dict):
                    self.timeline.add_event(who, ev.get("name"), ev.get("t"), ev.get("fields"))
            if data.get("dropped"):
                self.timeline.add_event(who, "events_dropped", time.time(), {"count": data["dropped"]})
        elif kind == "crash":
            self.postmortem.add_crash(
                dict(data, worker=w.to_json() if w else {"id": item.get("worker"), **who})
            )
        elif kind == "snapshot":
            row = dict(who, time=data.get("time"), frames=data.get("frames") or [])
            if self.points.add_row(data.get("id"), row):
                self.hub.publish("snapshot", {"id": data.get("id"), "row": row})
        else:
            log.info("an agent sent an item of unknown kind %r", kind)
