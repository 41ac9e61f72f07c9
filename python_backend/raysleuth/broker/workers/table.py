"""The worker table as a service: the agents' reports and Ray's State API, merged (by the pure
rules of `snapshot.py`) with what other services know: a link that holds a worker stopped, its
newest crash record, its GPU memory.

Other services tell it about changes through the hub (`link`, `crash-filed`); it publishes the
`workers` event when the table a client sees changed, and emits `table` after every recompute.
"""

from __future__ import annotations

import time

from raysleuth.broker.workers.snapshot import StateSnapshot, comparable, merge_nodes, merge_workers
from raysleuth.model.wire import PausedAt
from raysleuth.model.worker import Worker


class WorkerTable:
    def __init__(self, hub, crashes, gpu, clock=time.time) -> None:
        self.hub = hub
        self.crashes = crashes
        self.gpu = gpu
        self.clock = clock
        self.reports: list[dict] = []
        """The agents' latest reports (from the registry)."""
        self.state: StateSnapshot | None = None
        """The latest State API snapshot, or None while Ray's dashboard is unreachable."""
        self.ray_debugger_ports: dict[str, int] = {}
        """Worker id → port of a debugpy listener Ray's own breakpoint() opened (State API)."""
        self.stopped_links: dict[str, PausedAt | None] = {}
        """Worker id → where it is paused (or None while that is being found) while a link
        holds it stopped."""
        self._paused_since: dict[str, float] = {}
        """Worker id → when this table first saw its current pause."""
        self._resumed: dict[str, object] = {}
        """Worker id → `time` of its last report, a paused one, sent before a continue we made:
        that report is stale until the worker's next one arrives."""
        self._workers: list[Worker] = []
        self._json: list[dict] | None = None
        """`workers_json()`, made once per recompute: at 1,000 workers GET /v1/workers and each
        stream event would otherwise convert every worker again (bench/registry_scale.py)."""
        self._published: list[dict] | None = None
        self.busy: dict[str, dict] = {}
        """Worker id → {what, since, expression} while an evaluate holds it (workers/hostage.py)."""
        hub.on("busy", self._on_busy)
        hub.on("link", self._on_link)
        hub.on("crash-filed", lambda _rec: self.recompute())

    def __str__(self) -> str:
        return f"WorkerTable[{len(self._workers)} workers]"

    # --- inputs ---------------------------------------------------------------------------------

    def take_reports(self, reports: list[dict]) -> None:
        self.reports = reports
        self.recompute()

    def take_snapshot(self, snap: StateSnapshot) -> None:
        self.state = snap
        self.ray_debugger_ports = {
            sw["worker_id"]: sw["debugger_port"]
            for sw in snap.workers
            if sw.get("is_alive") and sw.get("debugger_port") and sw.get("num_paused_threads")
        }
        self.recompute()

    def resumed(self, worker_id: str) -> None:
        """We let `worker_id` run: its report still says paused until its next one arrives."""
        if self._mark_resumed(worker_id):
            self.recompute()

    def _mark_resumed(self, worker_id: str) -> bool:
        rep = next((r for r in self.reports if r.get("id") == worker_id), None)
        if rep is not None and rep.get("state") == "paused":
            self._resumed[worker_id] = rep.get("time")
            return True
        return False

    def _current_reports(self) -> list[dict]:
        """The reports, a paused one we have since resumed read as running."""
        out = []
        for rep in self.reports:
            wid = rep.get("id")
            if wid in self._resumed:
                if rep.get("state") == "paused" and rep.get("time") == self._resumed[wid]:
                    rep = dict(rep, state="running", paused_at=None)
                else:
                    del self._resumed[wid]
            out.append(rep)
        return out

    def _on_busy(self, change: dict) -> None:
        """An evaluate holds a worker, or let it go: {worker, busy (None: free)}."""
        if change.get("busy"):
            self.busy[change["worker"]] = change["busy"]
        else:
            self.busy.pop(change["worker"], None)
        self.recompute()

    def _on_link(self, change: dict) -> None:
        """A link's stop state changed: {worker, stopped, paused_at}."""
        if change.get("stopped"):
            self.stopped_links[change["worker"]] = change.get("paused_at")
        elif self.stopped_links.pop(change["worker"], False) is not False:
            # The link let it run (a continue, a session that ended): its paused report is stale,
            # so the next stop, even at the same line, is a new pause with its own paused_since
            # (issue #13: a repeat pause must open its session again).
            self._mark_resumed(change["worker"])
        self.recompute()

    # --- the table ------------------------------------------------------------------------------

    def recompute(self) -> None:
        workers = merge_workers(self._current_reports(), self.state, self.clock())
        for w in workers:
            if w.id in self.stopped_links and w.state != "exited":
                w.state = "paused"
                w.paused_at = self.stopped_links[w.id]
            if w.crash is None:
                rec = self.crashes.latest_for(w.id)
                w.crash = rec.id if rec is not None else None
            w.gpu_memory = self.gpu.summary(w.id)
            w.busy = self.busy.get(w.id) if w.state != "exited" else None  # type: ignore[assignment]
            self._time_the_pause(w)
        for wid in set(self._paused_since) - {w.id for w in workers if w.state == "paused"}:
            del self._paused_since[wid]
        self._workers, self._json = workers, None
        view = comparable(self.workers_json())
        if view != self._published:
            self._published = view
            self.hub.publish("workers", self.workers_json())
        self.hub.emit("table", None)

    def _time_the_pause(self, w: Worker) -> None:
        """A paused worker: since when, and the nearest timeout that will end the pause."""
        if w.state != "paused":
            w.deadlines = []
            return
        since = w.paused_since = self._paused_since.setdefault(w.id, self.clock())
        if w.deadlines:
            d = min(w.deadlines, key=lambda d: d.get("seconds") or float("inf"))
            w.deadline = {**d, "at": since + float(d.get("seconds") or 0)}

    def workers(self) -> list[Worker]:
        return self._workers

    def workers_json(self) -> list[dict]:
        """The workers as the contract's JSON objects (shared: callers must not change them)."""
        if self._json is None:
            self._json = [w.to_json() for w in self._workers]
        return self._json

    def get(self, worker_id: str) -> Worker | None:
        return next((w for w in self._workers if w.id == worker_id), None)

    def nodes(self) -> list[dict]:
        return merge_nodes(self.state, self._workers)

    def alive_nodes(self) -> list[dict]:
        return [n for n in (self.state.nodes if self.state else []) if n.get("state") == "ALIVE"]

    def live_ids(self) -> set[str]:
        """Workers that are neither gone nor crashed (those arm points)."""
        return {w.id for w in self._workers if w.state not in ("exited", "crashed")}

    def ray_debugger_port(self, worker_id: str) -> int | None:
        return self.ray_debugger_ports.get(worker_id)

    def ray_record(self, worker_id: str) -> dict | None:
        """Ray's own record of the worker (State API), if the last snapshot has it."""
        return next(
            (x for x in (self.state.workers if self.state else []) if x["worker_id"] == worker_id), None
        )

    def forgettable(self, after_s: float) -> list[str]:
        """Workers with an agent report that ended more than `after_s` ago (Ray says so, or they
        said goodbye): the registry need not keep their reports any more. Ray's own record of
        them still lists them as exited."""
        now = self.clock()
        reported = {r.get("id") for r in self.reports}
        return [
            w.id
            for w in self._workers
            if w.id in reported and w.state == "exited" and w.last_seen and now - w.last_seen > after_s
        ]

    def counts(self) -> dict:
        live = [w for w in self._workers if w.live]
        return {"workers": len(live), "agents": sum(1 for w in live if w.agent), "reports": len(self.reports)}
