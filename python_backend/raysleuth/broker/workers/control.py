"""Evaluate, continue and pause across workers (`POST /v1/evaluate`, `/v1/continue`, `/v1/pause`),
and ending one (`POST /v1/workers/{id}/kill`).

Workers are picked from the table by state, `ranks` and `workers` (ids or id prefixes); each one
that fails is reported in the answer and never stops the others. An evaluate the unbounded check
flags is refused unless `force`; each one sent, and each worker ended, goes to the audit log.
"""

from __future__ import annotations

import asyncio
import logging

from raysleuth.broker.workers.hostage import Hostages
from raysleuth.model.expr import check_expression
from raysleuth.model.unbounded import refuse_unbounded
from raysleuth.model.worker import Worker
from raysleuth.shared.errors import BadRequest, SleuthError

log = logging.getLogger(__name__)

RESUME_TIMEOUT_S = 10.0
PAUSE_WAIT_S = 2.0
"""How long a pause waits for the worker to stop before calling it pending."""
CANCEL_ANSWER_S = 1.0
"""How long cancelling a pending pause waits for debugpy's (usually absent) answer."""
PENDING_REASON = (
    "not paused yet: its main thread is in native code (idle between tasks, or in a C call such"
    " as ray.get or a collective); it pauses when it next runs Python, unless you continue it"
)


LINK_STOP_WAIT_S = 5.0
"""How long a step waits for a link the broker just opened to see its worker's stop."""
STEP_KINDS = ("next", "stepIn", "stepOut")
STEP_WAIT_S = 5.0
"""How long a group step waits for each rank to stop again before naming it as still running."""


class Control:
    def __init__(self, table, agents, leases, groups=None, *, hub=None, relays=None, audit=None) -> None:
        self.table = table
        self.agents = agents
        self.leases = leases
        self.groups = groups
        """The rank groups (broker/groups/book.py): a `group` selector names one."""
        self.hostages = Hostages(agents, table, hub, relays)
        """Evaluates with the broker's deadline, the workers they left busy, ending one."""
        self.audit = audit
        """The audit log (broker/audit.py), or None (tests)."""

    @staticmethod
    def only_selectors(body: dict, route: str) -> dict:
        """A continue or pause takes nothing but its selectors: a body naming something else is a
        mistake (found by the fuzz tests: `{"a": ...}` paused every worker in the cluster)."""
        unknown = sorted(str(k) for k in body if k not in ("ranks", "workers", "group"))
        if unknown:
            raise BadRequest(
                f"{route} takes only 'ranks', 'workers' and 'group', not {', '.join(map(repr, unknown[:5]))}",
                'Send {} for every worker, {"ranks": [0, 3]}, {"workers": ["3f2a..."]} or {"group": "g"}.',
            )
        return body

    def select(self, body: dict, states: tuple[str, ...]) -> list[Worker]:
        """Live workers in `states`, narrowed by `ranks` and/or `workers` (ids or id prefixes)."""
        ranks = body.get("ranks")
        ids = body.get("workers")
        group = body.get("group")
        if group is not None:
            if not isinstance(group, str) or self.groups is None:
                raise BadRequest(f"'group' must name a group, not {group!r}", 'Send "group": "stragglers".')
            members = self.groups.member_ids(group)
            ids = members if ids is None else [m for m in members if any(m.startswith(str(x)) for x in ids)]
        if ranks is not None and (
            not isinstance(ranks, list)
            or not all(isinstance(r, int) and not isinstance(r, bool) for r in ranks)
        ):
            raise BadRequest(f"'ranks' must be a list of integers, not {ranks!r}", 'Send "ranks": [0, 3].')
        if ids is not None and (not isinstance(ids, list) or not all(isinstance(i, str) for i in ids)):
            raise BadRequest("'workers' must be a list of worker ids", 'Send "workers": ["3f2a..."].')
        out = []
        for w in self.table.workers():
            if w.state not in states:
                continue
            if ranks is not None and w.rank not in ranks:
                continue
            if ids is not None and not any(w.id.startswith(i) for i in ids):
                continue
            out.append(w)
        return out

    def held(self, body: dict) -> list[Worker]:
        """Paused workers: the table's, and those a debugger link holds stopped that the table does
        not show yet (it hears of a stop once its line is found, a request later)."""
        out = []
        for w in self.select(body, ("paused", "running", "idle")):
            link = self.leases.get(w.id)
            if w.state == "paused" or (link is not None and link.stopped):
                out.append(w)
        return out

    async def evaluate(self, body: dict, client: dict | None = None) -> list[dict]:
        """`POST /v1/evaluate {expression, ranks?, workers?, group?, force?}`: a row per paused
        worker, each within the evaluate budget (broker/workers/hostage.py)."""
        expr = body.get("expression") if isinstance(body, dict) else None
        if not isinstance(expr, str) or not expr.strip():
            raise BadRequest("'expression' is missing", 'Send {"expression": "loss", "ranks": [0, 1]}.')
        check_expression(expr, f"{expr[:80]!r}", "Send one expression.")
        refuse_unbounded([("the expression", expr)], body.get("force"))
        workers = [w for w in self.held(body) if w.agent]
        if self.audit is not None and workers:
            self.audit.record(
                "evaluate", client=client, expression=expr, workers=[w.id for w in workers],
                ranks=[w.rank for w in workers], force=body.get("force") is True,
            )  # fmt: skip
        rows = await asyncio.gather(*(self.hostages.evaluate(w, expr) for w in workers))
        return sorted(
            rows, key=lambda r: (r["rank"] is None, r["rank"] if r["rank"] is not None else 0, r["pid"] or 0)
        )

    async def end_worker(self, worker_id: str, client: dict | None = None) -> dict:
        """`POST /v1/workers/{id}/kill`: end a worker's process (one an evaluate holds, usually)."""
        w = self.hostages.find(worker_id)
        if self.audit is not None:
            busy = self.hostages.busy.get(w.id)
            self.audit.record(
                "kill", client=client, expression=None, workers=[w.id], ranks=[w.rank], pid=w.pid,
                busy=busy["expression"] if busy else None,
            )  # fmt: skip
        return await self.hostages.end_worker(w)

    async def continue_paused(self, body: dict) -> dict:
        """Let paused workers run: through the debugger link where there is one, else the agent;
        a pause asked but not taken yet is cancelled."""
        sel = self.only_selectors(body, "POST /v1/continue")
        done, skipped = [], []
        held = self.held(sel)
        # Taken before any await: a stop that lands meanwhile clears `pause_pending`, and the
        # cancel's continue then resumes the thread it stopped.
        pending = [
            (w.id, link, link.pause_pending)
            for w in self.select(sel, ("running", "idle"))
            if (link := self.leases.get(w.id)) is not None
            and not link.stopped
            and link.pause_pending is not None
        ]
        for w in held:
            link = self.leases.get(w.id)
            if busy := self.hostages.busy_reason(w.id):  # asking it would only wait: nothing runs there
                skipped.append({"worker": w.id, "reason": busy})
                continue
            try:
                if link is not None and link.stopped:
                    await self.leases.continue_stopped(link)
                    done.append(w.id)
                    continue
                res = await self.agents.command(w.id, {"op": "resume"}, RESUME_TIMEOUT_S)
                if res.get("resumed"):
                    self.table.resumed(w.id)
                    done.append(w.id)
                else:
                    reason = res.get("error") or (
                        "paused in breakpoint(), waiting for a debugger: attach to continue it"
                    )
                    skipped.append({"worker": w.id, "reason": reason})
            except Exception as exc:  # noqa: BLE001 - one worker failing must not stop the rest
                skipped.append({"worker": w.id, "reason": f"{type(exc).__name__}: {exc}"})
        ok = await asyncio.gather(*(self._cancel_pause(link, tid) for _, link, tid in pending))
        cancelled = [wid for (wid, *_), yes in zip(pending, ok, strict=True) if yes]
        return {"continued": done, "skipped": skipped, "cancelled": cancelled}

    async def pause(self, body: dict) -> dict:
        """Pause running workers in the debugger (they show as paused; attach to see where).

        `paused`: stopped within PAUSE_WAIT_S; `pending`: asked, but in native code now (a later
        continue cancels it); `skipped`: could not be asked, with why.
        """
        res: dict = {"paused": [], "pending": [], "skipped": []}

        async def one(w: Worker) -> None:
            if not w.agent:
                res["skipped"].append({"worker": w.id, "reason": "no Ray Sleuth agent in this worker"})
                return
            try:
                # A worker an editor session debugs is paused through that session's link: the
                # session sees the stop (issue 25: Pause on the cluster session paused nothing).
                link = self.leases.get(w.id)
                if link is None or link.lease is None:
                    link = await self.leases.lease(w, None)
                threads = (await link.request("threads")).get("body", {}).get("threads") or []
                main = next(
                    (t for t in threads if t.get("name") == "MainThread"), threads[0] if threads else None
                )
                if main is None:
                    raise SleuthError("debugpy lists no threads", "The worker may be exiting.")
                await link.request("pause", {"threadId": main["id"]})
                if await link.wait_stopped(PAUSE_WAIT_S):
                    res["paused"].append(w.id)
                else:
                    link.pause_pending = main["id"]
                    res["pending"].append({"worker": w.id, "reason": PENDING_REASON})
            except Exception as exc:  # noqa: BLE001 - one worker failing must not stop the rest
                res["skipped"].append({"worker": w.id, "reason": f"{type(exc).__name__}: {exc}"})

        targets = self.select(self.only_selectors(body, "POST /v1/pause"), ("running", "idle"))
        await asyncio.gather(*(one(w) for w in targets))
        return res

    async def step(self, body: dict) -> dict:
        """`POST /v1/step {kind?, timeout?, ranks? | workers? | group?}`: step every selected paused
        rank on the thread it stopped on, at once; `stepped` ranks stopped again within `timeout`
        s (where: `paused_at`), `running` ones did not (typically inside a collective waiting for
        a rank outside the selection), `skipped` ones had no debugger link holding them."""
        if not isinstance(body, dict):
            raise BadRequest(
                "the body must be a JSON object", 'Send {"group": "stragglers", "kind": "next"}.'
            )
        kind = body.get("kind", "next")
        if kind not in STEP_KINDS:
            raise BadRequest(
                f"'kind' must be one of {', '.join(STEP_KINDS)}, not {kind!r}", 'Send "kind": "next".'
            )
        wait = body.get("timeout", STEP_WAIT_S)
        if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not 0.1 <= wait <= 60:
            raise BadRequest(f"'timeout' must be 0.1 to 60 seconds, not {wait!r}", 'Send "timeout": 5.')
        sel = self.only_selectors(
            {k: v for k, v in body.items() if k not in ("kind", "timeout")}, "POST /v1/step"
        )
        res: dict = {"stepped": [], "running": [], "skipped": []}

        async def one(w: Worker) -> None:
            who = {"worker": w.id, "rank": w.rank}
            if busy := self.hostages.busy_reason(w.id):
                res["skipped"].append(dict(who, reason=busy))
                return
            link = self.leases.get(w.id)
            if link is None and w.agent:
                # Paused at a cluster breakpoint and no session on it: the broker opens the link
                # itself (as an evaluate does); the stop then reaches it once attached.
                try:
                    link = await self.leases.lease(w, None)
                    await link.wait_stopped(LINK_STOP_WAIT_S)
                except Exception as exc:  # noqa: BLE001 - said in `skipped`, the others step on
                    res["skipped"].append(dict(who, reason=f"its debugger did not open: {exc}"))
                    return
            if link is None or not link.stopped:
                res["skipped"].append(
                    dict(who, reason="no debugger link holds it stopped: attach to it, then step")
                )
                return
            tid = next(iter(link.stopped))
            try:
                if await link.step(kind, tid, float(wait)):
                    res["stepped"].append(dict(who, paused_at=link.paused_at))
                else:
                    why = f"did not stop again within {wait:g} s: it runs, or waits for a rank not stepped"
                    res["running"].append(dict(who, reason=why))
            except Exception as exc:  # noqa: BLE001 - one worker failing must not stop the rest
                res["skipped"].append(dict(who, reason=f"{type(exc).__name__}: {exc}"))

        await asyncio.gather(*(one(w) for w in self.held(sel)))
        for k in res:
            res[k].sort(key=lambda r: (r["rank"] is None, r["rank"] or 0))
        return res

    async def _cancel_pause(self, link, tid) -> bool:
        """A worker asked to pause that never stopped: asked to run on instead (pydevd's continue
        clears a suspend request not yet taken, and resumes the thread if it stopped meanwhile),
        so it does not stop later on its own."""
        link.pause_pending = None
        try:
            # debugpy clears the suspend request at once but answers a continue only once a
            # thread really resumes (stopAllThreadsOnSuspend): no answer is the usual case.
            await link.request("continue", {"threadId": tid}, timeout=CANCEL_ANSWER_S)
        except asyncio.TimeoutError:
            pass
        except Exception as exc:  # noqa: BLE001 - the worker may be gone: nothing to cancel
            log.info("%s: cancelling a pending pause: %s", link, exc)
            return False
        return True

    async def resume_all_waiting(self) -> None:
        """At stop: workers waiting for a debugger in a cluster breakpoint run on without one."""
        waiting = [w for w in self.table.workers() if w.state == "paused" and w.agent]
        results = await asyncio.gather(
            *(self.agents.command(w.id, {"op": "resume"}, 2.0) for w in waiting), return_exceptions=True
        )
        for w, res in zip(waiting, results, strict=True):
            if isinstance(res, BaseException):
                log.info("resuming %s at stop: %s", w.id[:8], res)
