"""Leases on the broker's debugger links: at most one debugpy connection per worker, lent to one
editor session at a time. A session that ends gives the link back (its breakpoints cleared, a
stopped worker let go); an unused link is closed after a while.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time

from raysleuth.broker.debug.links import WorkerLink
from raysleuth.broker.postmortem.filing import describe_exit
from raysleuth.broker.tasks import OwnedTasks
from raysleuth.model.worker import Worker
from raysleuth.shared.errors import SleuthError
from raysleuth.shared.swallow import swallowed

log = logging.getLogger(__name__)

LINK_IDLE_S = float(os.environ.get("RAYSLEUTH_LINK_IDLE_S", "30"))
"""A link no session uses and no stop holds is closed after this many seconds: while debugpy has a
client it keeps watching the worker's code (measured 1.76x on 3.12); a new attach reopens it."""


class LinkLeases:
    def __init__(
        self, relays, agents, table, hub, idle_s: float = LINK_IDLE_S, link_class=WorkerLink
    ) -> None:
        self.link_class = link_class
        """What a link is: WorkerLink (a seam for tests)."""
        self.relays = relays
        self.agents = agents
        self.table = table
        self.hub = hub
        self.idle_s = idle_s
        self.links: dict[str, WorkerLink] = {}
        """Worker id → its link."""
        self._opening: dict[str, asyncio.Future[WorkerLink]] = {}
        self.idle_timers = OwnedTasks("link leases")

    def __len__(self) -> int:
        return len(self.links)

    def get(self, worker_id: str) -> WorkerLink | None:
        return self.links.get(worker_id)

    def _new_link(self, worker: Worker) -> WorkerLink:
        holder: list[WorkerLink] = []
        link = self.link_class(
            worker,
            relays=self.relays,
            agents=self.agents,
            ray_debugger_port=self.table.ray_debugger_port,
            on_change=lambda: self._changed(holder[0]) if holder else None,
            on_closed=self._closed,
        )
        holder.append(link)
        return link

    def _changed(self, link: WorkerLink) -> None:
        stopped = bool(link.stopped) and not link.closed.is_set()
        self.hub.emit("link", {"worker": link.worker_id, "stopped": stopped, "paused_at": link.paused_at})

    def _closed(self, link: WorkerLink) -> None:
        if self.links.get(link.worker_id) is link:
            del self.links[link.worker_id]
        self._changed(link)

    async def lease(self, worker: Worker, session, progress=None) -> WorkerLink:
        """The worker's link, opened if need be, leased to `session` (None: the broker itself)."""
        wid = worker.id
        link = self.links.get(wid)
        if link is not None and link.lease is not None and link.lease is not session:
            raise SleuthError(
                f"Worker pid {worker.pid} (rank {worker.rank}) is being debugged by "
                f"another session ({link.lease}).",
                "One session per worker: end the other session first, or attach to another rank.",
            )
        if link is None:
            opening = self._opening.get(wid)
            link = (
                await asyncio.shield(opening) if opening is not None else await self._open(worker, progress)
            )
            if link.lease is not None and link.lease is not session:
                raise SleuthError(
                    f"Worker pid {worker.pid} was just leased by {link.lease}.",
                    "End the other session first.",
                )
        link.lease = session
        self._changed(link)
        return link

    async def _open(self, worker: Worker, progress) -> WorkerLink:
        wid = worker.id
        fut = asyncio.get_running_loop().create_future()
        self._opening[wid] = fut
        link = self._new_link(worker)
        try:
            await link.open(progress and (lambda m: asyncio.ensure_future(progress(m))))
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()  # retrieved: nobody else may be waiting
            with swallowed(log, "closing %s after a failed open", link, level=logging.INFO):
                await link.close("open failed")
            raise
        finally:
            self._opening.pop(wid, None)
        self.links[wid] = link
        fut.set_result(link)
        return link

    async def release(self, link: WorkerLink, session) -> None:
        """A session ended: clear its breakpoints, let the worker run on, keep the link."""
        if link.lease is not session:
            return
        link.lease = None
        if link.closed.is_set():
            return
        # With no session (the broker is stopping), there are no session breakpoints to clear,
        # but a stopped worker must still be let go: pydevd would hold it suspended for ever.
        sources: set[str] | tuple[()] = session.breakpoint_sources if session is not None else ()
        try:
            for path in sources:
                await link.request("setBreakpoints", {"source": {"path": path}, "breakpoints": []})
            await link.request("setFunctionBreakpoints", {"breakpoints": []})
            await link.request("setExceptionBreakpoints", {"filters": []})
            for tid in list(link.stopped):
                await link.request("continue", {"threadId": tid})
        except Exception as exc:  # noqa: BLE001 - the worker may be gone: nothing to release
            log.info("%s: release after %s: %s", link, session, exc)
        self.close_when_idle(link)

    async def continue_stopped(self, link: WorkerLink) -> None:
        """Continue every thread the link holds stopped; an unleased link then idles out."""
        for tid in list(link.stopped):
            await link.request("continue", {"threadId": tid})
        if link.lease is None:
            self.close_when_idle(link)

    def close_when_idle(self, link: WorkerLink) -> None:
        """Close `link` after idle_s unless a session leases it or the worker stops again."""

        async def later():
            await asyncio.sleep(self.idle_s)
            if link.lease is None and not link.stopped and not link.closed.is_set():
                with swallowed(log, "disconnecting idle %s", link, level=logging.INFO):
                    await link.request("disconnect", {"terminateDebuggee": False}, timeout=5)
                await link.close("idle: no session used it")

        self.idle_timers.spawn(later(), f"closing idle {link}")

    async def describe_exit(self, worker_id: str, wait: float = 3.0) -> str:
        """Why a worker's debugger went away, from Ray's record of its death (a killed worker's link
        drops first, so this waits up to `wait` s for the State API to record it)."""
        deadline = time.monotonic() + wait
        while True:
            text = describe_exit(self.table.ray_record(worker_id))
            if text is not None:
                return text
            if time.monotonic() > deadline:
                return "the debugger connection dropped; the worker may have exited"
            await asyncio.sleep(0.2)

    async def close_all(self) -> None:
        """At broker stop: every stopped worker let go, every link closed, idle timers cancelled."""
        self.idle_timers.closed = True
        for link in list(self.links.values()):
            with swallowed(log, "releasing %s at stop", link, level=logging.INFO):
                await asyncio.wait_for(self.release(link, link.lease), 2)
            with swallowed(log, "closing %s at stop", link, level=logging.INFO):
                await asyncio.wait_for(link.close("the broker stopped"), 2)
        await self.idle_timers.close()
