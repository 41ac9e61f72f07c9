"""Waiting for a `DapChannel`'s queued events (`wait_event`, `next_event`): the channel's reader
task queues them (`queue_events`) and notifies `_event_added`. Standard library only."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from raysleuth.dap.errors import ChannelClosed, DapTimeout


class EventWaits:
    """The event-waiting half of a DapChannel (which sets these attributes)."""

    queue_events: bool
    events: list[dict]
    closed: asyncio.Event
    close_reason: str | None
    _event_added: asyncio.Condition

    async def wait_event(
        self,
        event: str | None = None,
        predicate: Callable[[dict], bool] | None = None,
        timeout: float | None = 30.0,
        *,
        consume: bool = True,
    ) -> dict:
        """The first queued event named `event` (any, if None) whose body matches `predicate`,
        waiting up to `timeout` s (DapTimeout). ChannelClosed if the channel closes first."""
        if not self.queue_events:
            raise RuntimeError(f"{self} hands its events to a callback; it does not queue them")

        def find() -> int | None:
            for i, ev in enumerate(self.events):
                if (event is None or ev.get("event") == event) and (
                    predicate is None or predicate(ev.get("body") or {})
                ):
                    return i
            return None

        async def wait() -> dict:
            async with self._event_added:
                while True:
                    i = find()
                    if i is not None:
                        return self.events.pop(i) if consume else self.events[i]
                    if self.closed.is_set():
                        what = f"a {event!r} event" if event else "an event"
                        raise ChannelClosed(
                            f"{self} closed before {what}: {self.close_reason}", self.close_reason
                        )
                    await self._event_added.wait()

        try:
            return await asyncio.wait_for(wait(), timeout)
        except asyncio.TimeoutError:
            what = f"{event!r} event" if event else "event"
            raise DapTimeout(f"{self}: no {what} in {timeout:g} s") from None

    async def next_event(self, timeout: float | None = None) -> dict:
        """The oldest queued event of any name."""
        return await self.wait_event(None, None, timeout)
