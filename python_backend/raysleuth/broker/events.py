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

    @property
    def watchers(self) -> int:
        """Number of clients watching the stream now (the post-mortem hold depends on it)."""
        return len(self._subscribers)

    def subscribe(self) -> asyncio.Queue:
        q: asyncio.Queue = asyncio.Queue(QUEUE_SIZE)
        self._subscribers.add(q)
        return q

    def unsubscribe(self, q: asyncio.Queue) -> None:
        self._subscribers.discard(q)

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
