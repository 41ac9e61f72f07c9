"""GPU memory per worker over time: the samples the agents send with their heartbeats (NVML's
per-process accounting, torch's allocator where the task uses torch), kept per worker in a
bounded ring, with the peak and a "growing" flag for memory that only goes up (a leak, a cache
that is never freed) — what the article's "which rank ran out of memory first" asks for.
"""

from __future__ import annotations

import collections

from raysleuth.model.wire import GpuMemory

KEEP = 720
"""Samples kept per worker (an hour at the broker's 5 s view of a steady worker)."""

WINDOW = 5
"""Samples `growing` looks at: the newest ones."""

MIN_GROWTH = 256 << 20
"""Bytes the window must rise by, never falling, to be called growing (noise stays below)."""


def _total(sample: dict) -> int:
    return sum(int(g.get("used_bytes") or 0) for g in sample.get("gpus") or [])


def attribution(sample: dict, gpu: dict) -> dict:
    """What of a process's GPU memory is PyTorch's (issue 26): torch allocated, torch reserved
    but free (its caching allocator), and the rest of what NVML counts for the process (the CUDA
    context, NCCL buffers, other libraries). None where torch's counters are not in the sample."""
    reserved = sample.get("torch_reserved")
    allocated = sample.get("torch_allocated")
    used = gpu.get("used_bytes")
    if not isinstance(reserved, int) or not isinstance(allocated, int) or not isinstance(used, int):
        return {"torch_reserved": reserved, "torch_cached_free": None, "not_torch_bytes": None}
    return {
        "torch_reserved": reserved,
        "torch_cached_free": max(0, reserved - allocated),
        "not_torch_bytes": max(0, used - reserved),
    }


class GpuHistory:
    def __init__(self, keep: int = KEEP) -> None:
        self._keep = keep
        self._samples: dict[str, collections.deque] = {}
        self._peak: dict[str, int] = {}
        self._rank: dict[str, int | None] = {}

    def add(self, worker_id: str, rank: int | None, sample: dict | None) -> bool:
        """One heartbeat's sample; False when it is not new (the same `t`) or not a sample."""
        if not worker_id or not isinstance(sample, dict) or not isinstance(sample.get("t"), (int, float)):
            return False
        ring = self._samples.get(worker_id)
        if ring is None:
            ring = self._samples[worker_id] = collections.deque(maxlen=self._keep)
        if ring and sample["t"] <= ring[-1]["t"]:
            return False
        ring.append(sample)
        self._rank[worker_id] = rank
        self._peak[worker_id] = max(self._peak.get(worker_id, 0), _total(sample))
        return True

    def new_tensors(self, worker_id: str, last: int) -> list[dict]:
        """The CUDA tensors the worker's agent saw appear, from the newest of its `last` samples
        that names any (issue 26); [] when none did."""
        for s in reversed(list(self._samples.get(worker_id) or ())[-last:]):
            if s.get("new_cuda_tensors"):
                return list(s["new_cuda_tensors"])
        return []

    def add_reports(self, reports: list[dict]) -> list[str]:
        """The registry's reports: the ids of workers with a new sample."""
        return [r["id"] for r in reports if r.get("id") and self.add(r["id"], r.get("rank"), r.get("gpu"))]

    def growing(self, worker_id: str) -> bool:
        ring = self._samples.get(worker_id) or ()
        if len(ring) < WINDOW:
            return False
        totals = [_total(s) for s in list(ring)[-WINDOW:]]
        never_fell = all(b >= a for a, b in zip(totals, totals[1:], strict=False))
        return never_fell and totals[-1] - totals[0] >= MIN_GROWTH

    def summary(self, worker_id: str) -> GpuMemory | None:
        """For the worker object: {used_bytes (newest), peak_bytes, growing}, or None."""
        ring = self._samples.get(worker_id)
        if not ring or not any(s.get("gpus") for s in ring):
            return None
        return {
            "used_bytes": _total(ring[-1]),
            "peak_bytes": self._peak.get(worker_id, 0),
            "growing": self.growing(worker_id),
        }

    def row(self, worker_id: str) -> dict:
        """The HTTP API's row: {worker, rank, peak_bytes, growing, samples: [{t, gpu, ...}]}."""
        samples = []
        for s in self._samples.get(worker_id) or ():
            for g in s.get("gpus") or []:
                samples.append(
                    {
                        "t": s["t"],
                        "gpu": g.get("gpu"),
                        "uuid": g.get("uuid"),
                        "used_bytes": g.get("used_bytes"),
                        "device_used_bytes": g.get("device_used_bytes"),
                        "total_bytes": g.get("total_bytes"),
                        "torch_allocated": s.get("torch_allocated"),
                        "torch_max_allocated": s.get("torch_max_allocated"),
                        **attribution(s, g),
                    }
                )
        return {
            "worker": worker_id,
            "rank": self._rank.get(worker_id),
            "peak_bytes": self._peak.get(worker_id, 0),
            "growing": self.growing(worker_id),
            "samples": samples,
        }

    def rows(self) -> list[dict]:
        """Workers with GPU samples, by rank (workers without a rank last)."""
        ids = [w for w, ring in self._samples.items() if any(s.get("gpus") for s in ring)]
        ids.sort(key=lambda w: (self._rank.get(w) is None, self._rank.get(w) or 0, w))
        return [self.row(w) for w in ids]
