"""Background tasks a service owns: each one logged if it fails, all cancelled and awaited when
the service closes (no task is left to print "Task exception was never retrieved" at exit)."""

from __future__ import annotations

import asyncio
import logging

log = logging.getLogger(__name__)


class OwnedTasks:
    def __init__(self, owner: str) -> None:
        self.owner = owner
        self._tasks: set[asyncio.Task] = set()
        self.closed = False

    def __len__(self) -> int:
        return len(self._tasks)

    def spawn(self, coro, what: str) -> asyncio.Task | None:
        """Run `coro` in the background; None (and the coroutine closed) once closed."""
        if self.closed:
            coro.close()
            return None
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(lambda t: self._done(t, what))
        return task

    def _done(self, task: asyncio.Task, what: str) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("%s: %s failed", self.owner, what, exc_info=task.exception())

    async def wait(self) -> None:
        """Wait for the tasks running now (tests)."""
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def close(self) -> None:
        self.closed = True
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
