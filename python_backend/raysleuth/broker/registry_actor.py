"""The registry actor: the mailbox every worker agent reports to, over Ray's own channels.

An async Ray actor on the broker's node, owned by the broker (it ends with it). It keeps the
latest report per worker and lets the broker long-poll for changes; it never blocks.
"""

from __future__ import annotations

import asyncio
import time

import ray


@ray.remote(num_cpus=0, max_concurrency=10_000)
class SleuthRegistry:
    def __init__(self) -> None:
        self._reports: dict[str, dict] = {}
        self._version = 0
        self._changed = asyncio.Event()

    def _bump(self) -> None:
        self._version += 1
        self._changed.set()
        self._changed = asyncio.Event()

    async def report(self, info: dict) -> dict:
        worker_id = info.get("id")
        if not worker_id:
            return {"ok": False, "error": "report without a worker id"}
        old = self._reports.get(worker_id)
        info = dict(info, received=time.time(), goodbye=None)
        self._reports[worker_id] = info
        # A heartbeat that changes nothing but timestamps needn't wake the broker.
        if old is None or _without_times(old) != _without_times(info):
            self._bump()
        return {"ok": True, "version": self._version}

    async def goodbye(self, worker_id: str, reason: str) -> dict:
        rec = self._reports.get(worker_id)
        if rec is not None:
            rec["goodbye"] = {"reason": reason, "time": time.time()}
            self._bump()
        return {"ok": True}

    async def changes(self, since: int, timeout: float) -> dict:
        """Reports once the version passes `since`, or after `timeout` seconds anyway."""
        if self._version <= since:
            try:
                await asyncio.wait_for(self._changed.wait(), timeout)
            except asyncio.TimeoutError:
                pass
        return {"version": self._version, "reports": list(self._reports.values()), "time": time.time()}

    async def ping(self) -> str:
        return "pong"


def _without_times(info: dict) -> dict:
    return {k: v for k, v in info.items() if k not in ("time", "received")}
