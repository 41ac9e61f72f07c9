"""No evaluate takes a worker hostage (#23, #37): the broker, not the worker, keeps the budget.

An evaluate is answered within `EVALUATE_BUDGET_S` whatever the worker does: its agent gets a
slightly smaller budget, after which it interrupts Python code and says so. An agent that does
not answer in time cannot: C code holds the worker's GIL (`sum(range(10**12))`), so no thread
of it runs. The broker then answers "still running" itself and marks the worker `busy` (shown in
`GET /v1/workers`) until its agent answers again; evaluates and continues skip a busy worker at
once, so the rest of the cluster never waits for it, and `POST /v1/workers/{id}/kill` ends it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from raysleuth.model.worker import Worker
from raysleuth.shared.errors import BadRequest, NotFound, SleuthError
from raysleuth.shared.limits import EVALUATE_BUDGET_S

log = logging.getLogger(__name__)

AGENT_MARGIN_S = 1.5
"""How much sooner than the broker's budget the agent must answer (its interrupt, a 0.5 s grace
and the trip through the registry fit in it)."""

LATE_ANSWER_S = 5.0
"""How long past the budget the registry still takes an agent's answer to the evaluate."""

PING_S = 30.0
"""How long each check of a busy worker's agent waits for its answer."""

KILL_WAIT_S = 10.0
"""How long ending a worker waits for its node's relay."""


def agent_budget(budget: float) -> float:
    """The agent's share of `budget`: AGENT_MARGIN_S less, but at least a third of it."""
    return max(budget - AGENT_MARGIN_S, budget / 3)


def hms(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))


class Hostages:
    """Evaluates with the broker's deadline, and the workers they left busy. `str()`: `Hostages[n busy]`."""

    def __init__(self, agents, table, hub=None, relays=None, budget: float = EVALUATE_BUDGET_S,
                 clock: Callable[[], float] = time.time) -> None:  # fmt: skip
        self.agents = agents
        self.table = table
        self.hub = hub
        """Where `busy` changes go (the table shows them), or None (tests)."""
        self.relays = relays
        """The node relays (`relay_for(node_id)`): how a worker is ended; None: it cannot be."""
        self.budget = budget
        self.clock = clock
        self.busy: dict[str, dict] = {}
        """Worker id → {what, since, expression}: an evaluate whose C code holds its GIL."""
        self._watchers: dict[str, asyncio.Task] = {}

    def __str__(self) -> str:
        return f"Hostages[{len(self.busy)} busy]"

    def busy_reason(self, worker_id: str) -> str | None:
        b = self.busy.get(worker_id)
        if b is None:
            return None
        return (
            f"busy: an evaluate since {hms(b['since'])} ({b['expression'][:60]!r}) holds its GIL in C"
            f" code; end the worker (POST /v1/workers/{worker_id}/kill, `raysleuth kill "
            f"{worker_id[:8]}`) or wait for it"
        )

    async def evaluate(self, w: Worker, expression: str) -> dict:
        """One worker's row: its agent's answer, or "still running" at the budget at the latest."""
        row: dict = {"rank": w.rank, "worker": w.id, "pid": w.pid}
        if w.id in self.busy:
            return dict(row, error=self.busy_reason(w.id), busy=self.busy[w.id])
        started = self.clock()
        command = {"op": "evaluate", "expression": expression, "budget": agent_budget(self.budget)}
        task = asyncio.ensure_future(self.agents.command(w.id, command, self.budget + LATE_ANSWER_S))
        done, _ = await asyncio.wait({task}, timeout=self.budget)
        if not done:
            busy = {"what": "evaluate", "since": started, "expression": expression}
            self._set_busy(w.id, busy)
            self._watchers[w.id] = asyncio.create_task(self._watch(w.id, task))
            return dict(
                row,
                error=(
                    f"still running after {self.budget:g} s: its agent does not answer, so C code holds"
                    " the worker's GIL (no thread of it runs Python); it shows as busy until that ends."
                    f" End it with POST /v1/workers/{w.id}/kill (`raysleuth kill {w.id[:8]}`)"
                ),
                busy=busy,
            )
        try:
            res = task.result()
        except Exception as exc:  # noqa: BLE001 - this worker's row says what failed
            return dict(row, error=f"{type(exc).__name__}: {exc}")
        if res.get("ok") and "value" in res:
            row.update(value=res["value"], type=res.get("type"))
            if isinstance(res.get("summary"), dict):
                row["summary"] = res["summary"]
        elif res.get("running"):
            row["error"] = f"still running after {self.budget:g} s: " + (
                "interrupted (its Python code was stopped); the worker takes a continue and other evaluates"
                if res["running"] == "interrupted"
                else "it is in a C call that lets other threads run (a sleep, I/O, a lock) and stops "
                "when that returns; the worker takes a continue and other evaluates meanwhile"
            )
        else:
            row["error"] = res.get("error") or "no answer"
        if res.get("path"):
            row["at"] = {"path": res["path"], "line": res.get("line")}
        return row

    async def _watch(self, worker_id: str, task: asyncio.Future) -> None:
        """Busy until the worker's agent answers again (its late answer, or a ping), or it ends."""
        try:
            res = await task
            answered = isinstance(res, dict) and not str(res.get("error", "")).startswith(
                "the worker's agent did not answer"
            )
            while not answered and worker_id in self.busy and self._live(worker_id):
                res = await self.agents.command(worker_id, {"op": "ping"}, PING_S)
                answered = bool(res.get("ok"))
        except Exception as exc:  # noqa: BLE001 - the registry restarting: the worker counts as free
            log.info("watching busy worker %s: %r", worker_id[:8], exc)
        finally:
            self._watchers.pop(worker_id, None)
            self._clear_busy(worker_id)

    def _live(self, worker_id: str) -> bool:
        w = self.table.get(worker_id)
        return w is not None and w.state not in ("exited",)

    def _set_busy(self, worker_id: str, busy: dict) -> None:
        self.busy[worker_id] = busy
        log.warning(
            "worker %s: an evaluate holds its GIL in C code (%r); shown busy",
            worker_id[:8],
            busy["expression"][:80],
        )
        if self.hub is not None:
            self.hub.emit("busy", {"worker": worker_id, "busy": busy})

    def _clear_busy(self, worker_id: str) -> None:
        if self.busy.pop(worker_id, None) is not None and self.hub is not None:
            self.hub.emit("busy", {"worker": worker_id, "busy": None})

    def find(self, worker_id: str) -> Worker:
        """A live worker by id or unique id prefix (NotFound / BadRequest with a hint)."""
        if not isinstance(worker_id, str) or not worker_id:
            raise BadRequest("name a worker id", "`raysleuth list` shows them.")
        found = [w for w in self.table.workers() if w.id.startswith(worker_id) and w.state != "exited"]
        if not found:
            raise NotFound(f"No live worker {worker_id[:40]!r}.", "`raysleuth list` shows the live workers.")
        if len(found) > 1:
            raise BadRequest(f"{worker_id!r} names {len(found)} workers", "Give more of its id.")
        return found[0]

    async def end_worker(self, w: Worker) -> dict:
        """SIGKILL the worker's process through its node's relay (a GIL held by C code ignores
        every gentler way); Ray then fails its task or restarts its actor as it would for a crash."""
        if self.relays is None or w.pid is None:
            raise SleuthError(f"Cannot end worker {w.id[:8]}: its node or pid is unknown.", None)
        relay: Any = await self.relays.relay_for(w.node_id)
        res = await asyncio.wait_for(relay.end_worker.remote(int(w.pid)), KILL_WAIT_S)
        if not res.get("ok"):
            raise SleuthError(
                f"Could not end worker {w.id[:8]} (pid {w.pid}): {res.get('error')}", res.get("hint")
            )
        watcher = self._watchers.get(w.id)
        if watcher is not None:
            watcher.cancel()
        self._clear_busy(w.id)
        log.warning("ended worker %s (pid %s) on request", w.id[:8], w.pid)
        return {"ok": True, "worker": w.id, "pid": w.pid}
