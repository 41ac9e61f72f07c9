"""The hang radar (issue 12): every selected worker's stacks at once, grouped, with the rank that
holds the others back named (`GET /v1/stacks`).

Each agent walks its own threads (the registry's command channel, all in parallel, under one
deadline); a worker without an agent, or whose agent does not answer in time, is read by
`py-spy dump` through its node's relay. A worker neither can read says why: a stack is never
made up. The watch mode (`hangwatch.py`) samples through `take`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from raysleuth.broker.radar.hangwatch import HangWatch
from raysleuth.model import frames as libframes
from raysleuth.model.scope import parse_ranks
from raysleuth.model.stacks import find_behind, format_text, group_stacks
from raysleuth.model.stacktree import stack_trees
from raysleuth.model.worker import Worker
from raysleuth.shared.errors import BadRequest

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 2.0
"""Deadline of one request, for all its workers together."""

MAX_TIMEOUT_S = 60.0

AGENT_SHARE = 0.5
"""Share of the deadline an agent gets before its worker is read by py-spy instead (an agent
answers in milliseconds unless its interpreter is wedged in C code holding the GIL)."""

GIL_HINT = "it may hold the GIL in C."

MIN_PYSPY_S = 0.2
"""py-spy is not started with less time than this left: the row says the deadline passed."""


@dataclass(frozen=True)
class StacksQuery:
    """Which workers `GET /v1/stacks` reads, and how."""

    job: str | None = None
    #: A job id (or a prefix of one); None: every job.
    ranks: frozenset | None = None
    #: Only workers with these ranks; None: any rank (workers without one too).
    workers: tuple[str, ...] | None = None
    #: Worker ids or id prefixes; None: every live worker that runs something or is an actor.
    native: bool = False
    #: Read with `py-spy dump --native` first (C frames too), the agent only where it fails.
    timeout: float = DEFAULT_TIMEOUT_S
    #: Seconds for the whole request.
    tree: bool = False
    #: Add `tree`: the parallel stack tree (one root for a job, else one per job; issue 27).
    all_frames: bool = False
    #: `text` lists every frame; by default runs of library frames are folded (issue #38).

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> StacksQuery:
        """From the query string (`?job=&ranks=0-7,9&workers=a,b&native=1&timeout=2`)."""
        ranks = params.get("ranks")
        workers = params.get("workers")
        native = str(params.get("native", "0")).strip().lower()
        if native not in ("0", "1", "true", "false", ""):
            raise BadRequest(f"'native' must be 0 or 1, not {native!r}", "Pass ?native=1 for C frames too.")
        tree = str(params.get("tree", "0")).strip().lower()
        if tree not in ("0", "1", "true", "false", ""):
            raise BadRequest(
                f"'tree' must be 0 or 1, not {tree!r}", "Pass ?tree=1 for the parallel stack tree."
            )
        all_frames = str(params.get("all_frames", "0")).strip().lower()
        if all_frames not in ("0", "1", "true", "false", ""):
            raise BadRequest(
                f"'all_frames' must be 0 or 1, not {all_frames!r}",
                "Pass ?all_frames=1 for the library frames too in `text`.",
            )
        return cls(
            job=params.get("job") or None,
            ranks=parse_ranks(ranks) if ranks else None,
            workers=split_ids(workers) if workers else None,
            native=native in ("1", "true"),
            timeout=parse_timeout(params.get("timeout")),
            tree=tree in ("1", "true"),
            all_frames=all_frames in ("1", "true"),
        )


def split_ids(text: str | Iterable[str]) -> tuple[str, ...]:
    items = text.split(",") if isinstance(text, str) else list(text)
    ids = tuple(i.strip() for i in items if isinstance(i, str) and i.strip())
    if not ids:
        raise BadRequest("'workers' names no worker", "Pass worker ids or prefixes: ?workers=3f2a,b7c1.")
    return ids


def parse_timeout(text) -> float:
    if text is None or text == "":
        return DEFAULT_TIMEOUT_S
    try:
        value = float(text)
    except (TypeError, ValueError):
        value = -1.0
    if not 0 < value <= MAX_TIMEOUT_S:
        raise BadRequest(
            f"'timeout' must be seconds above 0 and at most {MAX_TIMEOUT_S:.0f}, not {text!r}",
            "Pass ?timeout=2 (the default).",
        )
    return value


def select(workers: list[Worker], q: StacksQuery) -> list[Worker]:
    """Live workers matching the query. Without `workers`, a pool worker that runs nothing and
    hosts no actor is left out: it waits for work, it holds nobody back."""
    out = []
    for w in workers:
        if w.state == "exited" or not w.pid:
            continue
        if q.job is not None and not (w.job_id or "").startswith(q.job):
            continue
        if q.ranks is not None and w.rank not in q.ranks:
            continue
        if q.workers is not None:
            if not any(w.id.startswith(i) for i in q.workers):
                continue
        elif not w.actor_id and not w.task and w.state == "idle":
            continue
        out.append(w)
    return out


class StepIndex:
    """The last `step` field of each worker's `raysleuth.event()` records, read from the
    timeline as it grows (only the entries added since the last look)."""

    def __init__(self, timeline) -> None:
        self.timeline = timeline
        self._seen = 0
        self._last: dict[str, tuple[int, int]] = {}
        """Worker id → (seq of its newest event with a step, that step)."""

    def update(self) -> None:
        fresh = []
        for e in reversed(self.timeline.events):
            if e["seq"] <= self._seen:
                break
            fresh.append(e)
        for e in reversed(fresh):
            step = (e.get("fields") or {}).get("step")
            if e.get("worker") and isinstance(step, int) and not isinstance(step, bool):
                self._last[e["worker"]] = (e["seq"], step)
        if fresh:
            self._seen = fresh[0]["seq"]

    def step(self, worker_id: str) -> int | None:
        got = self._last.get(worker_id)
        return got[1] if got else None

    def seq(self, worker_id: str) -> int | None:
        """Seq of the worker's newest step event: a new one means the worker moved."""
        got = self._last.get(worker_id)
        return got[0] if got else None


class StacksService:
    """`take` reads stacks; `start`/`stop`/`status` drive the watch mode. `str()`: `Stacks[...]`."""

    def __init__(self, table, agents, relays, timeline, hub, clock=time.time) -> None:
        self.table = table
        self.agents = agents
        self.relays = relays
        self.clock = clock
        self.steps = StepIndex(timeline)
        self.watch = HangWatch(lambda: self.take(StacksQuery()), self.steps, timeline, hub, clock)

    def __str__(self) -> str:
        return f"Stacks[watch {'on' if self.watch.on else 'off'}]"

    async def take(self, query: StacksQuery | None = None, **kw) -> dict:
        """The JSON of `GET /v1/stacks` for `query` (or the same fields as keywords)."""
        q = query or StacksQuery(
            job=kw.get("job"),
            ranks=_ranks(kw.get("ranks")),
            workers=split_ids(kw["workers"]) if kw.get("workers") else None,
            native=bool(kw.get("native", False)),
            timeout=parse_timeout(kw.get("timeout")),
        )
        t0 = time.perf_counter()
        chosen = select(self.table.workers(), q)
        self.steps.update()
        deadline = asyncio.get_running_loop().time() + q.timeout
        answers = await asyncio.gather(*(self._one(w, q.native, deadline) for w in chosen))
        rows = [row for row, _ in answers]
        users = libframes.user_packages()  # frames of verl, Ray, torch.distributed: `library`
        for row in rows:
            for t in row["threads"]:
                if isinstance(t, dict) and isinstance(t.get("frames"), list):
                    t["frames"] = libframes.mark(t["frames"], users)
        collectives = [c for _, cs in answers for c in cs]
        rows.sort(key=lambda r: (r["job_id"] or "", r["rank"] is None, r["rank"] or 0, r["pid"] or 0))
        groups = group_stacks(rows)
        result = {
            "time": self.clock(),
            "elapsed_ms": 0.0,
            "workers": rows,
            "groups": groups,
            "collectives": collectives,
            "behind": find_behind(rows, groups, collectives),
        }
        result["text"] = format_text(result, q.all_frames)
        if q.tree:
            trees = stack_trees(rows)
            result["tree"] = (trees[0] if trees else None) if q.job else trees
        result["elapsed_ms"] = (time.perf_counter() - t0) * 1e3
        return result

    async def _one(self, w: Worker, native: bool, deadline: float) -> tuple[dict, list[dict]]:
        """One worker's row and its flight-recorder entries; never raises."""
        loop = asyncio.get_running_loop()
        row: dict = {
            "worker": w.id, "rank": w.rank, "pid": w.pid, "node_id": w.node_id, "job_id": w.job_id,
            "actor_class": w.actor_class, "task": w.task, "source": None, "error": None,
            "hint": None, "step": self.steps.step(w.id), "walk_ms": None, "threads": [],
        }  # fmt: skip
        why: list[str] = []
        hint = None
        order = ("py-spy", "agent") if native else ("agent", "py-spy")
        for source in order:
            left = deadline - loop.time()
            if source == "agent":
                if not w.agent:
                    why.append("no Ray Sleuth agent in this worker")
                    continue
                budget = left if native else left * AGENT_SHARE
                ans = await self._ask_agent(w, budget)
                if ans.get("ok") and isinstance(ans.get("threads"), list):
                    row.update(source="agent", threads=ans["threads"], walk_ms=ans.get("walk_ms"))
                    entries = [dict(c, worker=w.id) for c in ans.get("collectives") or []]
                    return row, [dict(c, rank=c.get("rank", w.rank)) for c in entries]
                why.append(f"agent: {ans.get('error') or 'no stacks in its answer'}")
            else:
                if left < MIN_PYSPY_S:
                    why.append("py-spy: the request's deadline passed before it could run")
                    continue
                ans = await self._ask_pyspy(w, native, left)
                if ans.get("threads"):
                    row.update(source="py-spy", threads=ans["threads"])
                    if w.agent and not native:  # its agent was asked first and did not answer
                        said = why[-1].removeprefix("agent: ")
                        row["hint"] = f"Read by py-spy: its agent gave no stacks ({said}); {GIL_HINT}"
                    return row, []
                why.append(f"py-spy: {ans.get('error') or 'no threads in its dump'}")
                hint = ans.get("hint") or hint
        row.update(error="; ".join(why), hint=hint)
        return row, []

    async def _ask_agent(self, w: Worker, budget: float) -> dict:
        try:
            return await asyncio.wait_for(self.agents.command(w.id, {"op": "stacks"}, budget), budget + 0.5)
        except asyncio.TimeoutError:
            return {"ok": False, "error": f"no answer within {budget:.1f} s"}
        except Exception as exc:  # noqa: BLE001 - this worker's row says what failed
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}

    async def _ask_pyspy(self, w: Worker, native: bool, left: float) -> dict:
        """`py-spy dump` of the worker, run by the relay on its node."""
        node = (w.node_id or "?")[:8]

        async def dump() -> dict:
            relay = await self.relays.relay_for(w.node_id)
            return await relay.pyspy_dump.remote(w.pid, native, max(0.1, left - 0.3))

        try:
            res = await asyncio.wait_for(dump(), left)
        except asyncio.TimeoutError:
            return {"error": f"no dump from node {node} within {left:.1f} s"}
        except Exception as exc:  # noqa: BLE001 - this worker's row says what failed
            return {"error": f"could not run on node {node}: {type(exc).__name__}: {exc}"}
        return res if isinstance(res, dict) else {"error": f"the relay answered {type(res).__name__}"}

    # --- the watch mode ---------------------------------------------------------------------

    async def start(self, interval_s: float = 10.0, samples: int = 3) -> dict:
        return await self.watch.start(interval_s, samples)

    async def stop(self) -> dict:
        return await self.watch.stop()

    def status(self) -> dict:
        return self.watch.status()

    async def close(self) -> None:
        await self.watch.close()


def _ranks(value) -> frozenset | None:
    if value is None or value == "":
        return None
    if isinstance(value, str):
        return parse_ranks(value)
    return frozenset(int(r) for r in value)
