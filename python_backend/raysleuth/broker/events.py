"""Fan-out of broker events to the server-sent-event stream's subscribers.

A slow subscriber loses old events, never slows the broker: its queue is bounded.
"""

from __future__ import annotations

import asyncio
import json

QUEUE_SIZE = 256


class EventHub:
    def __init__(self) -> None:
        self._subscribers: set[asyncio.Queue] = set()
        self.on_watchers = None
        """Called with the number of watchers whenever it changes."""

    def _changed(self) -> None:
        if self.on_watchers is not None:
            self.on_watchers(len(self._subscribers))

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
            if q.full():
                try:
                    q.get_nowait()
                except asyncio.QueueEmpty:
                    pass
            q.put_nowait(frame)


def format_sse(event: str, data) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()
