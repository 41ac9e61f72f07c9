"""What an attach waits for before it leases a worker's link: a held crash's worker report that
comes a moment after its record, and the agent of a worker Ray listed before the agent registered.
Both bounded; both read the worker table through `workers()`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from raysleuth.model.worker import Worker

HELD_REPORT_WAIT_S = 5.0
"""How long attach {crash} waits for a held worker's report after its record came first."""
AGENT_WAIT_S = 20.0
"""How long an attach to a worker listed before its agent registered waits for the agent."""
POLL_S = 0.05


async def held_worker(workers: Callable[[], list[Worker]], crash_id: str, rec) -> Worker | None:
    """The worker held for this crash, if it is. A record that says it is held may come a moment
    before the worker's own report does (a client that attaches on the `crash` event): wait for
    that report, up to HELD_REPORT_WAIT_S, before taking the worker for gone."""

    def find() -> Worker | None:
        return next((w for w in workers() if w.state == "crashed" and w.crash == crash_id and w.agent), None)

    held = find()
    held_until = rec.held_until or 0
    deadline = time.monotonic() + HELD_REPORT_WAIT_S
    while held is None and held_until > time.time() and time.monotonic() < deadline:
        if any(w.id == rec.worker_id and w.state == "exited" for w in workers()):
            break
        await asyncio.sleep(POLL_S)
        held = find()
    return held


async def with_agent(
    workers: Callable[[], list[Worker]], worker: Worker, progress: Callable[[str], Awaitable[None]]
) -> Worker:
    """The worker, once its agent registered, when one is expected: Ray's State API lists a new
    worker before its agent's first report (issue 25). Expected when another worker of its job or
    node has an agent; waits at most AGENT_WAIT_S, saying so through `progress`."""
    if worker.agent or not worker.live:
        return worker
    peers = [
        w for w in workers()
        if w.agent and w.id != worker.id and (w.job_id == worker.job_id or w.node_id == worker.node_id)
    ]  # fmt: skip
    if not peers:
        return worker
    await progress(
        f"waiting for the Ray Sleuth agent of worker pid {worker.pid} to register "
        f"(the worker has just started; up to {AGENT_WAIT_S:g} s) ..."
    )
    deadline = time.monotonic() + AGENT_WAIT_S
    while time.monotonic() < deadline:
        now = next((w for w in workers() if w.id == worker.id), None)
        if now is None or now.agent or not now.live:
            return now or worker
        await asyncio.sleep(POLL_S)
    return worker
