"""The broker process (`raysleuth broker`): connects to Ray, starts the registry actor, merges
agent reports with the State API, and serves the HTTP API and the DAP front door.

Its stdout carries exactly one line, the ready JSON; everything else goes to stderr.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import os
import re
import signal
import sys
import time
from pathlib import Path

from aiohttp import web

from raysleuth import __version__, names
from raysleuth.broker.auth import load_or_create_token
from raysleuth.broker.crashes import CrashStore
from raysleuth.broker.crashes import summary as crash_summary
from raysleuth.broker.events import EventHub
from raysleuth.broker.gpu import GpuHistory
from raysleuth.broker.points import ClusterPoints, public
from raysleuth.broker.state_api import StateApiClient
from raysleuth.broker.workers import StateSnapshot, comparable, merge_nodes, merge_workers
from raysleuth.errors import BadRequest, SleuthError
from raysleuth.paths import BROKER_FILE

log = logging.getLogger("raysleuth.broker")

STATE_POLL_S = float(os.environ.get("RAYSLEUTH_STATE_POLL_S", "1.0"))
"""Seconds between State API snapshots (each is 4 requests of 5-20 ms)."""

LINK_IDLE_S = float(os.environ.get("RAYSLEUTH_LINK_IDLE_S", "30"))
"""A link no session uses and no stop holds is closed after this many seconds: while debugpy has a
client it keeps watching the worker's code (measured 1.76x on 3.12); a new attach reopens it."""

HOLD_S = float(os.environ.get("RAYSLEUTH_POSTMORTEM_HOLD", "120"))
"""How long a crashed worker waits for an attach while a client watches the stream."""

DEATH_TYPES = {"SYSTEM_ERROR": "worker_died", "NODE_OUT_OF_MEMORY": "oom"}
"""Ray's exit types of an unexpected death (a crash record each) and the record's kind."""

DOCTOR_TIMEOUT_S = 30.0
"""How long `raysleuth doctor` waits for a node's relay (a first start included)."""

EVENTS_KEEP = 50_000
"""Timeline entries the broker keeps (oldest dropped first)."""

CHANGES_WAIT_S = 5.0
"""Long-poll window on the registry actor; also how often last_seen refreshes at the latest."""


def connect_ray(address: str | None):
    """`ray.init` for the broker: never streams worker logs, never starts a cluster of its own."""
    import ray

    target = address or os.environ.get("RAY_ADDRESS") or "auto"
    hint = (
        "Start a cluster with `RAYSLEUTH=1 ray start --head`, or pass --address HOST:PORT "
        "(or set RAY_ADDRESS)."
    )
    _probe_gcs(target, hint)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            return ray.init(
                address=target, namespace=names.NAMESPACE, log_to_driver=False, logging_level=logging.WARNING
            )
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise SleuthError(f"Cannot connect to Ray at {target}: {exc}", hint) from exc


def _probe_gcs(target: str, hint: str, timeout: float = 5.0) -> None:
    """Fail fast on an explicit HOST:PORT that nothing listens on (ray.init retries for minutes)."""
    import socket

    host, sep, port = target.rpartition(":")
    if not sep or "://" in target or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        raise SleuthError(f"Cannot connect to Ray at {target}: {exc.strerror or exc}", hint) from None


class Broker:
    def __init__(self, address: str | None, host: str, port: int, dap_port: int, state_dir: Path) -> None:
        self.address = address
        self.host = host
        self.port = port
        self.dap_port = dap_port
        self.state_dir = state_dir
        self.token, self.token_file = load_or_create_token(state_dir)
        self.hub = EventHub()
        self.reports: list[dict] = []
        self.state: StateSnapshot | None = None
        self._workers: list[dict] = []
        self._published: list[dict] | None = None
        self._stop = asyncio.Event()
        self.registry = None
        self.ray_context = None
        self.state_api: StateApiClient | None = None
        self.http_url: str | None = None
        self.dap_address: str | None = None
        self.started = time.time()
        self.links: dict = {}
        """Worker id → WorkerLink: the broker's one debugpy connection per debugged worker."""
        self._link_opening: dict[str, asyncio.Future] = {}
        self.relays: dict[str, object] = {}
        """Node id → that node's NodeRelay actor handle."""
        self._relay_starting: dict[str, asyncio.Task] = {}
        self.ray_debugger_ports: dict[str, int] = {}
        """Worker id → port of a debugpy listener Ray's own breakpoint() opened (State API)."""
        self._idle_tasks: set[asyncio.Future] = set()
        self.points = ClusterPoints(state_dir)
        self._published_points: list | None = None
        self.logs: collections.deque = collections.deque(maxlen=5000)
        """Logpoint lines, oldest first, each with a `seq`."""
        self._log_seq = 0
        self.events: collections.deque = collections.deque(maxlen=EVENTS_KEEP)
        """The cluster's timeline: `raysleuth.event()` records of every worker, and crashes."""
        self._event_seq = 0
        self.crashes = CrashStore(state_dir)
        self.gpu = GpuHistory()
        self._seen_alive: set[str] = set()
        """Workers this broker saw alive: only their deaths are news."""
        self._deaths_done: set[str] = set()
        self.hub.on_watchers = lambda n: asyncio.ensure_future(self.push_watch())

    def __str__(self) -> str:
        return f"Broker[{self.http_url}]"

    # --- data -------------------------------------------------------------------------------

    def workers(self) -> list[dict]:
        return self._workers

    def nodes(self) -> list[dict]:
        return merge_nodes(self.state, self._workers)

    def status(self) -> dict:
        return {
            "version": __version__,
            "ray_address": self.ray_context.address_info.get("gcs_address") if self.ray_context else None,
            "dashboard": self.state_api.url if self.state_api else None,
            "dap": self.dap_address,
            "links": len(self.links),
            "state_api": {
                "ok": self.state is not None and self.state_api.last_error is None,
                "error": self.state_api.last_error if self.state_api else None,
            },
            "workers": sum(1 for w in self._workers if w["state"] != "exited"),
            "agents": sum(1 for w in self._workers if w["agent"] and w["state"] != "exited"),
            "watchers": self.hub.watchers,
            "crashes": len(self.crashes),
            "started": self.started,
        }

    def recompute(self) -> None:
        workers = merge_workers(self.reports, self.state, time.time())
        for w in workers:
            link = self.links.get(w["id"])
            if link is not None and link.stopped and w["state"] != "exited":
                w["state"] = "paused"
                w["paused_at"] = link.paused_at
            if w.get("crash") is None:
                rec = self.crashes.latest_for(w["id"])
                w["crash"] = rec["id"] if rec is not None else None
            w["gpu_memory"] = self.gpu.summary(w["id"])
        self._workers = workers
        view = comparable(self._workers)
        if view != self._published:
            self._published = view
            self.hub.publish("workers", self._workers)
        self._publish_points()

    # --- cluster breakpoints ----------------------------------------------------------------

    def armed_counts(self) -> collections.Counter:
        """Point id → number of live workers that have it armed now (from their reports)."""
        live = {w["id"] for w in self._workers if w["state"] not in ("exited", "crashed")}
        counts: collections.Counter = collections.Counter()
        for rep in self.reports:
            if rep.get("id") in live and rep.get("goodbye") is None:
                counts.update(rep.get("armed") or ())
        return counts

    def breakpoint_listing(self) -> list[dict]:
        counts = self.armed_counts()
        return [public(p, counts.get(p["id"], 0)) for p in self.points.breakpoints()]

    def snapshot_listing(self) -> list[dict]:
        counts = self.armed_counts()
        return [dict(s, armed=counts.get(s["id"], 0)) for s in self.points.snapshot_listing()]

    def _publish_points(self) -> None:
        listing = self.breakpoint_listing()
        if listing != self._published_points:
            self._published_points = listing
            self.hub.publish("breakpoints", listing)

    async def push_points(self) -> None:
        """Hand the current set to the registry: every agent gets it with its next heartbeat."""
        specs = self.points.agent_specs()
        if self.registry is not None:
            version = await self.registry.set_points.remote(specs)
            await asyncio.to_thread(_kv_put_points, {"version": version, "points": specs})
        self._publish_points()

    async def put_breakpoints(self, body: dict, who: str = "") -> dict:
        parsed = self.points.put_file(body)
        log.info(
            "breakpoints of %s set to lines %s%s",
            body.get("path") if isinstance(body, dict) else "?",
            [p["line"] for p in parsed] or "none",
            f" by {who}" if who else "",
        )
        await self.push_points()
        counts = self.armed_counts()
        return {
            "path": parsed[0]["path"] if parsed else body.get("path"),
            "breakpoints": [public(p, counts.get(p["id"], 0)) for p in parsed],
        }

    def select_workers(self, body: dict, states: tuple[str, ...]) -> list[dict]:
        """Live workers in `states`, narrowed by `ranks` and/or `workers` (ids or id prefixes)."""
        ranks = body.get("ranks")
        ids = body.get("workers")
        if ranks is not None and (not isinstance(ranks, list) or not all(isinstance(r, int) for r in ranks)):
            raise BadRequest(f"'ranks' must be a list of integers, not {ranks!r}", 'Send "ranks": [0, 3].')
        if ids is not None and (not isinstance(ids, list) or not all(isinstance(i, str) for i in ids)):
            raise BadRequest("'workers' must be a list of worker ids", 'Send "workers": ["3f2a..."].')
        out = []
        for w in self._workers:
            if w["state"] not in states or w.get("driver"):
                continue
            if ranks is not None and w.get("rank") not in ranks:
                continue
            if ids is not None and not any(w["id"].startswith(i) for i in ids):
                continue
            out.append(w)
        return out

    async def evaluate(self, body: dict) -> list[dict]:
        expr = body.get("expression") if isinstance(body, dict) else None
        if not isinstance(expr, str) or not expr.strip():
            raise BadRequest("'expression' is missing", 'Send {"expression": "loss", "ranks": [0, 1]}.')
        try:
            compile(expr, "<evaluate>", "eval")
        except SyntaxError as exc:
            raise BadRequest(
                f"{expr!r} is not a Python expression: {exc.msg}", "Send one expression."
            ) from None
        workers = [w for w in self.select_workers(body, ("paused",)) if w.get("agent")]

        async def one(w: dict) -> dict:
            res = await self.registry.command.remote(w["id"], {"op": "evaluate", "expression": expr}, 15.0)
            row = {"rank": w.get("rank"), "worker": w["id"], "pid": w.get("pid")}
            if res.get("ok") and "value" in res:
                row.update(value=res["value"], type=res.get("type"))
            else:
                row["error"] = res.get("error") or "no answer"
            if res.get("path"):
                row["at"] = {"path": res["path"], "line": res.get("line")}
            return row

        rows = await asyncio.gather(*(one(w) for w in workers))
        return sorted(
            rows, key=lambda r: (r["rank"] is None, r["rank"] if r["rank"] is not None else 0, r["pid"] or 0)
        )

    async def continue_paused(self, body: dict) -> dict:
        """Let paused workers run: through the debugger link where there is one, else the agent."""
        done, skipped = [], []
        for w in self.select_workers(body, ("paused",)):
            link = self.links.get(w["id"])
            try:
                if link is not None and link.stopped:
                    for tid in list(link.stopped):
                        await link.request("continue", {"threadId": tid})
                    done.append(w["id"])
                    if link.lease is None:
                        self.close_when_idle(link)
                    continue
                res = await self.registry.command.remote(w["id"], {"op": "resume"}, 10.0)
                if res.get("resumed"):
                    done.append(w["id"])
                else:
                    skipped.append(
                        {
                            "worker": w["id"],
                            "reason": res.get("error")
                            or "paused in breakpoint(), waiting for a debugger: attach to continue it",
                        }
                    )
            except Exception as exc:  # noqa: BLE001 - one worker failing must not stop the rest
                skipped.append({"worker": w["id"], "reason": f"{type(exc).__name__}: {exc}"})
        return {"continued": done, "skipped": skipped}

    async def pause(self, body: dict) -> dict:
        """Pause running workers in the debugger (they show as paused; attach to see where)."""
        done, skipped = [], []
        for w in self.select_workers(body, ("running", "idle")):
            if not w.get("agent"):
                skipped.append({"worker": w["id"], "reason": "no Ray Sleuth agent in this worker"})
                continue
            try:
                link = await self.lease_link(w, None)
                threads = (await link.request("threads")).get("body", {}).get("threads") or []
                main = next(
                    (t for t in threads if t.get("name") == "MainThread"), threads[0] if threads else None
                )
                if main is None:
                    raise SleuthError("debugpy lists no threads", "The worker may be exiting.")
                await link.request("pause", {"threadId": main["id"]})
                done.append(w["id"])
            except Exception as exc:  # noqa: BLE001
                skipped.append({"worker": w["id"], "reason": f"{type(exc).__name__}: {exc}"})
        return {"paused": done, "skipped": skipped}

    def _on_emitted(self, item: dict) -> None:
        w = next((x for x in self._workers if x["id"] == item.get("worker")), {})
        data = item.get("data") or {}
        rank = data.get("rank") if data.get("rank") is not None else w.get("rank")
        who = {"rank": rank, "worker": item.get("worker"), "pid": data.get("pid") or w.get("pid")}
        if item.get("kind") == "log":
            self._log_seq += 1
            rec = dict(
                who,
                seq=self._log_seq,
                **{k: data.get(k) for k in ("path", "line", "message", "time", "point")},
            )
            if data.get("error"):
                rec["error"] = True
            self.logs.append(rec)
            self.hub.publish("log", rec)
        elif item.get("kind") == "events":
            for ev in data.get("items") or []:
                if isinstance(ev, dict):
                    self.add_event(who, ev.get("name"), ev.get("t"), ev.get("fields"))
            if data.get("dropped"):
                self.add_event(who, "events_dropped", time.time(), {"count": data["dropped"]})
        elif item.get("kind") == "crash":
            self.add_crash(dict(data, worker=dict(w) if w else {"id": item.get("worker"), **who}))
        elif item.get("kind") == "snapshot":
            row = dict(who, time=data.get("time"), frames=data.get("frames") or [])
            if self.points.add_row(data.get("id"), row):
                self.hub.publish("snapshot", {"id": data.get("id"), "row": row})

    async def _watch_emitted(self) -> None:
        seq = -1
        while not self._stop.is_set():
            try:
                res = await self.registry.emitted.remote(seq, CHANGES_WAIT_S)
            except Exception as exc:  # noqa: BLE001 - _watch_registry restarts the actor
                log.info("emitted: %s", exc)
                await asyncio.sleep(1.0)
                seq = -1
                continue
            if seq == -1:
                items = []  # a fresh start: what was emitted before this broker is not news
            else:
                items = res["items"]
                if res.get("lost"):
                    log.warning("%d logpoint lines or snapshot rows were dropped", res["lost"])
            seq = res["seq"]
            for item in items:
                try:
                    self._on_emitted(item)
                except Exception:  # noqa: BLE001
                    log.exception("bad emitted item")

    def add_event(self, who: dict, name, t, fields) -> dict:
        """One entry of the timeline: {seq, time, name, rank, worker, pid, fields}."""
        self._event_seq += 1
        rec = {
            "seq": self._event_seq,
            "time": float(t) if isinstance(t, (int, float)) else time.time(),
            "name": str(name),
            "rank": who.get("rank"),
            "worker": who.get("worker"),
            "pid": who.get("pid"),
            "fields": fields if isinstance(fields, dict) else {},
        }
        self.events.append(rec)
        return rec

    # --- post-mortem --------------------------------------------------------------------------

    def add_crash(self, rec: dict) -> dict:
        worker = rec.get("worker") or {}
        ident = rec.pop("identity", None) or {}
        rec.pop("hold_request", None)  # a record sent late (no broker at the crash) was not held
        for k in ("rank", "actor_class", "actor_name", "actor_id", "pid", "node_id", "node_ip", "job_id"):
            if worker.get(k) is None and ident.get(k) is not None:
                worker[k] = ident[k]
        if rec.get("task") and not worker.get("task"):
            worker["task"] = rec["task"]
        rec["worker"] = worker
        rec = self.crashes.add(rec)
        log.info("crash %s: %s %s", rec["id"], rec.get("kind"), rec.get("exc_type") or "")
        self.add_event(
            {"rank": worker.get("rank"), "worker": worker.get("id"), "pid": worker.get("pid")},
            "crash",
            rec.get("time"),
            {"crash": rec["id"], "kind": rec.get("kind"), "error": rec.get("exc_type") or rec.get("message")},
        )
        self.hub.publish("crash", crash_summary(rec))
        self.recompute()
        return rec

    async def push_watch(self) -> None:
        """Tell the registry whether anyone watches: crashed workers are held only then."""
        if self.registry is None:
            return
        with contextlib.suppress(Exception):
            await self.registry.set_watch.remote(self.hub.watchers > 0, HOLD_S)

    def _note_deaths(self, snap: StateSnapshot) -> None:
        """Workers seen alive that died unexpectedly (SIGKILL, segfault, os._exit, OOM): a record each."""
        reports = {r.get("id"): r for r in self.reports if r.get("id")}
        for sw in snap.workers:
            wid = sw.get("worker_id")
            if sw.get("worker_type") not in (None, "WORKER") or not wid:
                continue
            if sw.get("is_alive"):
                self._seen_alive.add(wid)
                continue
            kind = DEATH_TYPES.get(sw.get("exit_type") or "")
            seen = wid in self._seen_alive or (wid in reports and not reports[wid].get("goodbye"))
            if kind is None or not seen or wid in self._deaths_done:
                continue
            if wid not in reports and not any(
                a.get("pid") == sw.get("pid") and a.get("node_id") == sw.get("node_id") for a in snap.actors
            ):
                continue  # an idle pool worker of no actor nor agent: nothing to look at
            self._deaths_done.add(wid)
            log.info("worker %s died (%s): recording it", wid[:8], sw.get("exit_type"))
            task = asyncio.ensure_future(self._record_death(sw, reports.get(wid)))
            task.add_done_callback(
                lambda t: (
                    t.cancelled()
                    or not t.exception()
                    or log.error("recording a worker death failed", exc_info=t.exception())
                )
            )

    async def _record_death(self, sw: dict, report: dict | None) -> None:
        wid = sw["worker_id"]
        w = next((x for x in self._workers if x["id"] == wid), None) or {"id": wid, "pid": sw.get("pid")}
        detail = (sw.get("exit_detail") or "").strip()
        kind = DEATH_TYPES[sw["exit_type"]]
        fault = None
        path = (report or {}).get("fault_file")
        if path:
            try:
                relay = await self.relay_for(sw.get("node_id"))
                fault = await asyncio.wait_for(relay.fault_text.remote(path), 10)
            except Exception as exc:  # noqa: BLE001 - the record still tells what Ray knows
                log.info("faulthandler text of %s: %s", wid[:8], exc)
        if fault and kind == "worker_died" and "Segmentation fault" in fault:
            kind = "segfault"
        last = dict(report) if report else None
        rec = {
            "kind": kind,
            "time": (sw.get("end_time_ms") or time.time() * 1000) / 1000.0,
            "exc_type": None,
            "message": detail.splitlines()[0] if detail else f"the worker died ({sw.get('exit_type')})",
            "exit_type": sw.get("exit_type"),
            "exit_detail": detail,
            "faulthandler": fault,
            "frames": _fault_frames(fault),
            "gpu": (last or {}).get("gpu"),
            "last_report": last,
            "worker": dict(w),
        }
        self.add_crash(rec)

    async def resume_all_waiting(self) -> None:
        """At stop: workers waiting for a debugger in a cluster breakpoint run on without one."""
        waiting = [w for w in self._workers if w["state"] == "paused" and w.get("agent")]
        await asyncio.gather(
            *(self.registry.command.remote(w["id"], {"op": "resume"}, 2.0) for w in waiting),
            return_exceptions=True,
        )

    def take_snapshot(self, snap: StateSnapshot) -> None:
        """A new State API snapshot: Ray's own debugger ports, a relay on every node, the table."""
        self.state = snap
        self._note_deaths(snap)
        self.ray_debugger_ports = {
            sw["worker_id"]: sw["debugger_port"]
            for sw in snap.workers
            if sw.get("is_alive") and sw.get("debugger_port") and sw.get("num_paused_threads")
        }
        for n in snap.nodes:
            if n.get("state") == "ALIVE" and n["node_id"] not in self.relays:
                self._start_relay_soon(n["node_id"])
        self.recompute()

    # --- debugging: relays, links, leases ----------------------------------------------------

    def _start_relay_soon(self, node_id: str) -> None:
        if node_id not in self._relay_starting:
            self._relay_starting[node_id] = asyncio.ensure_future(self._start_relay(node_id))

    async def _start_relay(self, node_id: str):
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from raysleuth.broker.relay_actor import NodeRelay

        try:
            relay = NodeRelay.options(
                name=f"raysleuth-relay-{node_id[:16]}",
                namespace=names.NAMESPACE,
                get_if_exists=True,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
                runtime_env={"env_vars": {"RAYSLEUTH": "0"}},
            ).remote()
            await asyncio.wait_for(relay.ping.remote(), 60)
        except Exception as exc:  # noqa: BLE001
            self._relay_starting.pop(node_id, None)
            raise SleuthError(
                f"Could not start the node relay on node {node_id[:8]}: {exc}",
                "Check that the node is alive (`ray status`).",
            ) from exc
        self.relays[node_id] = relay
        log.info("relay ready on node %s", node_id[:8])
        return relay

    async def relay_for(self, node_id: str | None):
        if not node_id:
            raise SleuthError("The worker's node is unknown.", "Wait a moment and attach again.")
        if node_id in self.relays:
            return self.relays[node_id]
        self._start_relay_soon(node_id)
        return await asyncio.shield(self._relay_starting[node_id])

    async def doctor(self) -> dict:
        """`GET /v1/doctor`: the broker's own checks and each live node's, from its relay."""
        from raysleuth.doctor import _check

        nodes = [n for n in (self.state.nodes if self.state else []) if n.get("state") == "ALIVE"]

        async def one(n: dict) -> dict:
            try:
                relay = await asyncio.wait_for(self.relay_for(n["node_id"]), DOCTOR_TIMEOUT_S)
                checks = await asyncio.wait_for(relay.doctor.remote(time.time()), DOCTOR_TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001 - one node that cannot answer is a finding
                checks = [
                    _check(
                        "relay",
                        "fail",
                        f"the node did not answer: {type(exc).__name__}: {exc}",
                        "Check the node with `ray status`; Ray Sleuth reaches every node through its relay.",
                    )
                ]
            return {"node_id": n["node_id"], "node_ip": n.get("node_ip"), "checks": checks}

        reports = await asyncio.gather(*(one(n) for n in nodes))
        live = [
            w
            for w in self._workers
            if w["state"] != "exited" and w.get("actor_class") not in names.OWN_ACTOR_CLASSES
        ]
        bare = [w for w in live if not w.get("agent")]
        broker = [
            _check("nodes", "ok" if nodes else "fail", f"{len(nodes)} alive node(s) in Ray's State API"),
            _check(
                "workers",
                "ok" if not bare else "warn",
                f"{len(live)} live worker(s), {len(bare)} without the agent",
                None
                if not bare
                else "Those workers cannot be attached to or armed: start Ray with RAYSLEUTH=1.",
            ),
            _check(
                "listen",
                "ok" if self.host in ("127.0.0.1", "localhost", "::1") else "info",
                f"HTTP {self.http_url}, DAP {self.dap_address}, token required on both",
            ),
        ]
        fails = [c for c in broker + [c for r in reports for c in r["checks"]] if c["status"] == "fail"]
        return {"ok": not fails, "broker": broker, "nodes": list(reports)}

    def resolve_target(self, args: dict) -> dict:
        """The worker an attach names: `worker` (an id or unique prefix) or `rank` (+ `job`)."""
        from raysleuth.broker.targets import resolve_target

        return resolve_target(self._workers, args)

    async def lease_link(self, worker: dict, session, progress=None):
        """The worker's link, opened if need be, leased to `session`."""
        from types import SimpleNamespace

        from raysleuth.broker.links import WorkerLink

        wid = worker["id"]
        link = self.links.get(wid)
        if link is not None and link.lease is not None and link.lease is not session:
            raise SleuthError(
                f"Worker pid {worker.get('pid')} (rank {worker.get('rank')}) is being debugged by "
                f"another session ({link.lease}).",
                "One session per worker: end the other session first, or attach to another rank.",
            )
        if link is None:
            opening = self._link_opening.get(wid)
            if opening is not None:
                link = await asyncio.shield(opening)
            else:
                fut = asyncio.get_running_loop().create_future()
                self._link_opening[wid] = fut
                link = WorkerLink(
                    worker,
                    relays=SimpleNamespace(relay_for=self.relay_for),
                    agents=SimpleNamespace(command=lambda w, c, t: self.registry.command.remote(w, c, t)),
                    ray_debugger_port=lambda w: self.ray_debugger_ports.get(w),
                    on_change=self.recompute,
                    on_closed=lambda lk: (self.links.pop(lk.worker_id, None), self.recompute()),
                )
                try:
                    await link.open(progress and (lambda m: asyncio.ensure_future(progress(m))))
                except BaseException as exc:
                    fut.set_exception(exc)
                    fut.exception()  # retrieved: nobody else may be waiting
                    with contextlib.suppress(Exception):
                        await link.close("open failed")
                    raise
                finally:
                    self._link_opening.pop(wid, None)
                self.links[wid] = link
                fut.set_result(link)
            if link.lease is not None and link.lease is not session:
                raise SleuthError(
                    f"Worker pid {worker.get('pid')} was just leased by {link.lease}.",
                    "End the other session first.",
                )
        link.lease = session
        self.recompute()
        return link

    async def release_link(self, link, session) -> None:
        """A session ended: clear its breakpoints, let the worker run on, keep the link."""
        if link.lease is not session:
            return
        link.lease = None
        if link.closed.is_set():
            return
        # With no session (the broker is stopping), there are no session breakpoints to clear,
        # but a stopped worker must still be let go: pydevd would hold it suspended for ever.
        sources = session.breakpoint_sources if session is not None else ()
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

    def close_when_idle(self, link) -> None:
        """Close `link` after LINK_IDLE_S unless a session leases it or the worker stops again."""

        async def later():
            await asyncio.sleep(LINK_IDLE_S)
            if link.lease is None and not link.stopped and not link.closed.is_set():
                with contextlib.suppress(Exception):
                    await link.request("disconnect", {"terminateDebuggee": False}, timeout=5)
                await link.close("idle: no session used it")

        if not self._stop.is_set():
            task = asyncio.ensure_future(later())
            self._idle_tasks.add(task)
            task.add_done_callback(self._idle_tasks.discard)

    async def describe_exit(self, worker_id: str, wait: float = 3.0) -> str:
        """Why a worker's debugger went away, in words, from Ray's record of the worker's death.

        Waits up to `wait` s for the State API to record it: a killed worker's link drops first.
        """
        deadline = time.monotonic() + wait
        while True:
            sw = next(
                (x for x in (self.state.workers if self.state else []) if x["worker_id"] == worker_id), None
            )
            if sw is not None and not sw.get("is_alive"):
                detail = (sw.get("exit_detail") or "").strip().splitlines()
                what = {
                    "INTENDED_SYSTEM_EXIT": "it was stopped on purpose (ray.kill or job end)",
                    "INTENDED_USER_EXIT": "it exited on purpose",
                    "SYSTEM_ERROR": "it died unexpectedly",
                    "USER_ERROR": "it exited with an error",
                    "NODE_OUT_OF_MEMORY": "the node ran out of memory (OOM killer)",
                }
                text = what.get(sw.get("exit_type"), f"it exited ({sw.get('exit_type')})")
                return text + (f": {detail[0]}" if detail else "")
            if time.monotonic() > deadline:
                return "the debugger connection dropped; the worker may have exited"
            await asyncio.sleep(0.2)

    # --- Ray side ---------------------------------------------------------------------------

    async def start_registry(self) -> None:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from raysleuth.broker.registry_actor import SleuthRegistry

        if self.registry is None:
            await asyncio.to_thread(_refuse_second_broker)
        node_id = ray.get_runtime_context().get_node_id()
        self.registry = SleuthRegistry.options(
            name=names.REGISTRY_ACTOR,
            namespace=names.NAMESPACE,
            get_if_exists=True,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
            runtime_env={"env_vars": {"RAYSLEUTH": "0"}},
        ).remote()
        await asyncio.wait_for(self.registry.ping.remote(), 60)

    async def _watch_registry(self) -> None:
        version = -1
        while not self._stop.is_set():
            try:
                res = await self.registry.changes.remote(version, CHANGES_WAIT_S)
            except Exception as exc:  # noqa: BLE001 - the actor died: start it again
                log.warning("registry actor failed (%s); restarting it", exc)
                await asyncio.sleep(1.0)
                with contextlib.suppress(Exception):
                    await self.start_registry()
                    await self.push_points()
                    await self.push_watch()
                version = -1
                continue
            version = res["version"]
            self.reports = res["reports"]
            for wid in self.gpu.add_reports(self.reports):
                row = self.gpu.row(wid)
                self.hub.publish("gpu", dict(row, samples=row["samples"][-8:]))  # the newest only
            self.recompute()

    async def _watch_state(self) -> None:
        while not self._stop.is_set():
            snap = await self.state_api.snapshot()
            if snap is not None:
                self.take_snapshot(snap)
            else:
                self.recompute()  # agents that went silent still turn stale
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stop.wait(), STATE_POLL_S)

    # --- serving ----------------------------------------------------------------------------

    async def run(self, ready_out) -> None:
        from raysleuth.broker.dap_front import DapFrontDoor
        from raysleuth.broker.http_api import make_app

        self.ray_context = await asyncio.to_thread(connect_ray, self.address)
        self.state_api = StateApiClient(self.ray_context.dashboard_url)
        await self.start_registry()
        await self.push_points()
        await self.push_watch()
        first = await self.state_api.snapshot()
        if first is None:
            log.warning(
                "Ray's State API is unreachable (%s): only workers with the agent will be listed",
                self.state_api.last_error,
            )
        if first is not None:
            self.take_snapshot(first)
        else:
            self.recompute()

        runner = web.AppRunner(make_app(self), access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        await site.start()
        http_port = site._server.sockets[0].getsockname()[1]  # noqa: SLF001 - port 0 means "pick one"
        self.http_url = f"http://{_url_host(self.host)}:{http_port}"
        dap = DapFrontDoor(self)
        dap_server = await asyncio.start_server(dap.handle, self.host, self.dap_port)
        self.dap_address = f"{_url_host(self.host)}:{dap_server.sockets[0].getsockname()[1]}"

        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._stop.set)
        tasks = [
            asyncio.create_task(self._watch_registry()),
            asyncio.create_task(self._watch_state()),
            asyncio.create_task(self._watch_emitted()),
        ]

        ready = {
            "ready": True,
            "http": self.http_url,
            "dap": self.dap_address,
            "token_file": str(self.token_file),
            "pid": os.getpid(),
            "ray_address": self.status()["ray_address"],
            "version": __version__,
        }
        broker_file = self.state_dir / BROKER_FILE
        _write_json(broker_file, ready)
        ready_out.write(json.dumps(ready) + "\n")
        ready_out.flush()
        log.info("%s ready; DAP at %s", self, self.dap_address)
        try:
            await self._stop.wait()
        finally:
            log.info("%s stopping", self)
            _remove_if_ours(broker_file)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.resume_all_waiting(), 3)
            for link in list(self.links.values()):
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self.release_link(link, link.lease), 2)
                    await asyncio.wait_for(link.close("the broker stopped"), 2)
            for t in tasks:
                t.cancel()
            self.hub.on_watchers = None
            self.hub.close()
            dap_server.close()
            await asyncio.wait_for(runner.cleanup(), 3)
            await self.state_api.close()
            await asyncio.to_thread(self._stop_ray)

    def _stop_ray(self) -> None:
        import ray

        _kv_put_points(None)  # no broker, no points: a worker starting now arms nothing
        with contextlib.suppress(Exception):
            if self.registry is not None:
                ray.kill(self.registry)
        with contextlib.suppress(Exception):
            ray.shutdown()


_FAULT_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+) in (?P<function>\S+)')


def _fault_frames(text: str | None) -> list[dict]:
    """faulthandler's 'File "x.py", line 12 in f' lines (innermost first) as record frames."""
    out = []
    for line in (text or "").splitlines():
        m = _FAULT_FRAME.match(line)
        if m:
            out.append({"path": m["path"], "line": int(m["line"]), "function": m["function"], "locals": {}})
        elif out and not line.strip():
            break  # the first thread's stack only: the one that faulted
    return out


def _kv_put_points(data: dict | None) -> None:
    """Leave the point set in Ray's internal KV for workers whose agent has not synced yet."""
    from ray.experimental import internal_kv

    try:
        if data is None:
            internal_kv._internal_kv_del(names.POINTS_KV_KEY, namespace=names.NAMESPACE)
        else:
            internal_kv._internal_kv_put(
                names.POINTS_KV_KEY, json.dumps(data), overwrite=True, namespace=names.NAMESPACE
            )
    except Exception as exc:  # noqa: BLE001 - the registry still delivers the set
        log.warning("writing the point set to Ray's KV failed: %s", exc)


def _refuse_second_broker() -> None:
    """One broker per cluster: a live registry actor means another broker owns it."""
    import ray

    try:
        existing = ray.get_actor(names.REGISTRY_ACTOR, namespace=names.NAMESPACE)
        ray.get(existing.ping.remote(), timeout=5)
    except Exception:  # noqa: BLE001 - none, or a dead one: ours to start
        return
    raise SleuthError(
        "Another Ray Sleuth broker already runs for this Ray cluster.",
        "Use that one (its broker.json is in its state dir on the head node), or stop it first.",
    )


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def _remove_if_ours(path: Path) -> None:
    try:
        if json.loads(path.read_text()).get("pid") == os.getpid():
            path.unlink()
    except (OSError, ValueError):
        pass


def main(address: str | None, host: str, port: int, dap_port: int, state_dir: Path) -> int:
    """Run the broker until SIGINT/SIGTERM; exit status 0 on a clean stop."""
    logging.basicConfig(
        stream=sys.stderr,
        level=os.environ.get("RAYSLEUTH_LOG_LEVEL", "INFO"),
        format="%(asctime)s broker %(levelname)s %(name)s: %(message)s",
    )
    ready_out = sys.stdout
    sys.stdout = sys.stderr  # stdout carries only the ready line
    broker = Broker(address, host, port, dap_port, state_dir)
    try:
        asyncio.run(broker.run(ready_out))
    except SleuthError as exc:
        print(f"error: {exc.message}\nhint: {exc.hint}", file=sys.stderr)
        return 2
    return 0
