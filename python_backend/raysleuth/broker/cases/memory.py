"""Memory cases: a worker whose GPU memory grows across its samples, or whose device is nearly
full, filed once per episode (it files again after the memory fell and grew anew)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from raysleuth.model.case import memory_case

if TYPE_CHECKING:
    from raysleuth.broker.events import EventHub
    from raysleuth.broker.telemetry.gpu import GpuHistory
    from raysleuth.model.worker import Worker

NEAR_TOTAL = 0.95
"""A device this full (all its processes together) is a memory case."""
EVIDENCE_SAMPLES = 8
"""Samples a memory case keeps as evidence: the newest."""


class MemoryWatch:
    def __init__(self, gpu: GpuHistory, hub: EventHub, clock: Callable[[], float] = time.time) -> None:
        self.gpu = gpu
        self.hub = hub
        self.clock = clock
        self._open: dict[str, set[str]] = {}

    def check(self, worker_ids: list[str], workers: dict[str, Worker]) -> None:
        """After new samples of these workers: file what just began (`case` on the hub)."""
        for wid in worker_ids:
            row = self.gpu.row(wid)
            samples = row["samples"]
            if not samples:
                continue
            last = samples[-1]
            now_open = {"growing"} if row["growing"] else set()
            total = int(last.get("total_bytes") or 0)
            device = int(last.get("device_used_bytes") or last.get("used_bytes") or 0)
            if total and device >= NEAR_TOTAL * total:
                now_open.add("near_total")
            w = workers.get(wid)
            ident = {
                "id": wid,
                "rank": row.get("rank"),
                "job_id": w.job_id if w else None,
                "pid": w.pid if w else None,
            }
            for reason in sorted(now_open - self._open.get(wid, set())):
                new = self.gpu.new_tensors(wid, EVIDENCE_SAMPLES)
                self.hub.emit(
                    "case", memory_case(ident, samples[-EVIDENCE_SAMPLES:], reason, self.clock(), new)
                )
            self._open[wid] = now_open
