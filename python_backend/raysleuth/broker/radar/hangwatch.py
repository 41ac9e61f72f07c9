"""The hang radar's watch mode (issue 12): sample every worker's stacks every N seconds and raise
one "suspected hang" per job whose ranks stood at the same frames for M samples in a row while
no `step` event arrived.

The sampler is an owned task (cancelled and awaited at stop); each sample's cost is measured and
shown in `status()`. A job is raised once, then not again until its stacks or steps move.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from raysleuth.broker.tasks import OwnedTasks
from raysleuth.model.stacks import format_text, rank_ranges, stack_signature
from raysleuth.shared.errors import BadRequest

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_S = 10.0
DEFAULT_SAMPLES = 3
MIN_INTERVAL_S = 0.05
MAX_INTERVAL_S = 3600.0
MAX_SAMPLES = 1000

HANG_EVENT = "suspected hang"
"""Name of the timeline entry a raised hang adds."""


@dataclass
class _JobState:
    signature: tuple
    steps: tuple
    since: float
    count: int = 1
    raised: bool = False


class HangDetector:
    """Pure rules: one sample in, the jobs that just turned into a suspected hang out."""

    def __init__(self, samples: int) -> None:
        self.samples = samples
        self._jobs: dict = {}

    def feed(self, result: dict, now: float, step_seq: Callable[[str], int | None]) -> list[dict]:
        """`result` is one `GET /v1/stacks` answer; `step_seq(worker)` the seq of that worker's
        newest step event (a new one means it moved)."""
        by_job: dict = {}
        for row in result.get("workers") or []:
            by_job.setdefault(row.get("job_id"), []).append(row)
        raised = []
        for job, rows in by_job.items():
            if not any(r.get("task") for r in rows):
                self._jobs.pop(job, None)  # nothing of it runs: idle actors wait, they do not hang
                continue
            signature = tuple(sorted((str(r.get("worker")), stack_signature(r)) for r in rows))
            steps = tuple(sorted((str(r.get("worker")), step_seq(r.get("worker")) or 0) for r in rows))
            st = self._jobs.get(job)
            if st is None or st.signature != signature or st.steps != steps:
                self._jobs[job] = _JobState(signature, steps, now)
                continue
            st.count += 1
            if st.count >= self.samples and not st.raised:
                st.raised = True
                raised.append(_hang(result, job, rows, st))
        for job in set(self._jobs) - set(by_job):
            del self._jobs[job]
        return raised


def _hang(result: dict, job, rows: list[dict], st: _JobState) -> dict:
    ids = {r.get("worker") for r in rows}
    part = {
        "workers": rows,
        "groups": [g for g in result.get("groups") or [] if g.get("job_id") == job],
        "collectives": [c for c in result.get("collectives") or [] if c.get("worker") in ids],
        "behind": [b for b in result.get("behind") or [] if b.get("worker") in ids],
    }
    ranks = [r["rank"] for r in rows if isinstance(r.get("rank"), int)]
    return {
        "job_id": job,
        "ranks_text": rank_ranges(ranks),
        "since": st.since,
        "samples": st.count,
        "behind": part["behind"],
        "text": format_text(part),
        "stacks": part,
    }


class HangWatch:
    """Drives the sampler. `take()` is one `GET /v1/stacks` of every worker."""

    def __init__(self, take: Callable[[], Awaitable[dict]], steps, timeline, hub, clock=time.time) -> None:
        self.take = take
        self.steps = steps
        self.timeline = timeline
        self.hub = hub
        self.clock = clock
        self.tasks = OwnedTasks("hang watch")
        self._task: asyncio.Task | None = None
        self.interval: float = DEFAULT_INTERVAL_S
        self.samples: int = DEFAULT_SAMPLES
        self.cost_ms: float | None = None
        """What the last sample took, request to grouped stacks."""
        self.taken = 0
        self.hangs = 0
        self.error: str | None = None

    @property
    def on(self) -> bool:
        return self._task is not None and not self._task.done()

    def status(self) -> dict:
        return {
            "on": self.on,
            "interval": self.interval,
            "samples": self.samples,
            "cost_ms": self.cost_ms,
            "taken": self.taken,
            "hangs": self.hangs,
            "error": self.error,
        }

    async def start(self, interval_s=DEFAULT_INTERVAL_S, samples=DEFAULT_SAMPLES) -> dict:
        """(Re)start sampling every `interval_s` s; a hang needs `samples` equal samples."""
        interval_s, samples = check_settings(interval_s, samples)
        await self.stop()
        self.interval, self.samples = interval_s, samples
        self.taken, self.cost_ms, self.error = 0, None, None
        self._task = self.tasks.spawn(self._run(HangDetector(samples)), "sampling stacks")
        log.info("hang watch on: every %.2f s, %d samples", interval_s, samples)
        return self.status()

    async def stop(self) -> dict:
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        return self.status()

    async def close(self) -> None:
        self._task = None
        await self.tasks.close()

    async def _run(self, detector: HangDetector) -> None:
        while True:
            t0 = time.perf_counter()
            try:
                await self.sample(detector)
            except Exception as exc:  # noqa: BLE001 - one failed sample must not end the watch
                log.exception("a stacks sample failed")
                self.error = f"{type(exc).__name__}: {exc}"
            spent = time.perf_counter() - t0
            await asyncio.sleep(max(0.0, self.interval - spent))

    async def sample(self, detector: HangDetector) -> list[dict]:
        """One sample: publish it as `stacks`, and each job that turned hung as `hang`."""
        result = await self.take()
        self.cost_ms = result.get("elapsed_ms")
        self.taken += 1
        self.error = None
        self.hub.publish("stacks", result)
        hangs = detector.feed(result, self.clock(), self.steps.seq)
        for hang in hangs:
            self.hangs += 1
            log.warning("suspected hang in job %s (ranks %s)", hang["job_id"], hang["ranks_text"])
            self.hub.publish("hang", {k: v for k, v in hang.items() if k != "stacks"})
            self.hub.emit("hang-found", hang)
            fields = {k: hang[k] for k in ("job_id", "ranks_text", "since", "samples", "text")}
            self.timeline.add_event({"rank": None, "worker": None, "pid": None}, HANG_EVENT, None, fields)
        return hangs


def check_settings(interval, samples) -> tuple[float, int]:
    try:
        interval = float(interval)
    except (TypeError, ValueError):
        interval = -1.0
    if not MIN_INTERVAL_S <= interval <= MAX_INTERVAL_S:
        raise BadRequest(
            f"'interval' must be seconds from {MIN_INTERVAL_S} to {MAX_INTERVAL_S:.0f}",
            'Send {"interval": 10, "samples": 3}.',
        )
    if isinstance(samples, bool) or not isinstance(samples, int) or not 1 <= samples <= MAX_SAMPLES:
        raise BadRequest(
            f"'samples' must be a whole number from 1 to {MAX_SAMPLES}, not {samples!r}",
            'Send {"interval": 10, "samples": 3}.',
        )
    return interval, samples
