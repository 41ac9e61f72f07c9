"""The broker's hub: events for the server-sent-event stream's subscribers, and the topics its
services tell each other about (a link stopped, a crash was filed, the table changed).

A slow subscriber loses old events, never slows the broker: its queue is bounded. A listener
that fails is logged and the others still run.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable

from raysleuth.shared.swallow import swallow_exception

log = logging.getLogger(__name__)

QUEUE_SIZE = 256
"""Events a stream client may fall behind before it is dropped (it reconnects and is current)."""


class EventHub:
    def __init__(self) -> None:
        self._subscribers: set[asyncio.Queue] = set()
        self.on_watched: Callable[[bool], object] | None = None
        """Called with True when the first client starts watching, False when the last leaves
        (the post-mortem hold depends on it); not on every connect, which costs a Ray call."""
        self._watched = False
        self._listeners: dict[str, list[Callable]] = {}

    def on(self, topic: str, listener: Callable) -> None:
        """Call `listener(payload)` on every `emit(topic, payload)` (in the broker's own loop)."""
        self._listeners.setdefault(topic, []).append(listener)

    def emit(self, topic: str, payload=None) -> None:
        """Tell the broker's services: not sent to clients (that is `publish`)."""
        for listener in list(self._listeners.get(topic, ())):
            try:
                listener(payload)
            except Exception:  # noqa: BLE001 - one listener's bug must not stop the others
                swallow_exception(log, "a %s listener failed", topic, level=logging.ERROR)

    def _changed(self) -> None:
        watched = bool(self._subscribers)
        if watched != self._watched:
            self._watched = watched
            if self.on_watched is not None:
                self.on_watched(watched)

    @property
    def watchers(self) -> int:
        """Number of clients watching the stream now (the post-mortem hold depends on it)."""
        return len(self._subscribers)

    def subscribe(self) -> asyncio.Queue:
        q: asyncio.Queue = asyncio.Queue(QUEUE_SIZE)
        self._subscribers.add(q)
        self._changed()
        return q

    def unsubscribe(self, q: asyncio.Queue) -> None:
        if q in self._subscribers:
            self._subscribers.discard(q)
            self._changed()

    def close(self) -> None:
        """End every subscriber's stream (the broker stops)."""
        for q in list(self._subscribers):
            while q.full():
                q.get_nowait()
            q.put_nowait(None)

    def publish(self, event: str, data) -> None:
        frame = format_sse(event, data)
        for q in list(self._subscribers):
            if q.full():  # this client fell QUEUE_SIZE events behind: it is told, then dropped
                while not q.empty():
                    q.get_nowait()
                q.put_nowait(DROPPED)
                q.put_nowait(None)
                self.unsubscribe(q)
                continue
            q.put_nowait(frame)


def format_sse(event: str, data) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


DROPPED = format_sse(
    "dropped",
    {"reason": f"this client fell {QUEUE_SIZE} events behind and was dropped", "hint": "Reconnect."},
)
