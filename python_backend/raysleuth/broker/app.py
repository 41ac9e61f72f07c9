"""The broker process (`raysleuth broker`): builds its services, connects to Ray, runs the watch
loops and the two servers (HTTP API, DAP front door), and writes the ready file.

Its stdout carries exactly one line, the ready JSON; everything else goes to stderr. The services
get their collaborators here and never hold this object.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from aiohttp import web

from raysleuth import __version__
from raysleuth.broker.audit import AuditLog
from raysleuth.broker.auth import load_or_create_token
from raysleuth.broker.cases.book import CaseBook
from raysleuth.broker.cases.memory import MemoryWatch
from raysleuth.broker.cases.watches import WatchService
from raysleuth.broker.connect import (
    connect_ray,
    exposure_warning,
    remove_if_ours,
    shutdown_ray,
    url_host,
    write_json,
)
from raysleuth.broker.debug.allstop import AllStop
from raysleuth.broker.debug.dap_front import DapFrontDoor
from raysleuth.broker.debug.leases import LinkLeases
from raysleuth.broker.debug.relays import RelayPool
from raysleuth.broker.events import EventHub
from raysleuth.broker.groups.book import GroupBook
from raysleuth.broker.http_api import Services, make_app
from raysleuth.broker.oneport import Gate, bearer_in, serve_one_port
from raysleuth.broker.points.inspect import Inspections
from raysleuth.broker.points.service import PointService, PointSet
from raysleuth.broker.postmortem.crashes import CrashStore
from raysleuth.broker.postmortem.filing import PostMortem
from raysleuth.broker.postmortem.rerun import Reruns
from raysleuth.broker.radar.doctor import Doctor
from raysleuth.broker.radar.stacks import StacksService
from raysleuth.broker.tasks import OwnedTasks
from raysleuth.broker.telemetry.gpu import GpuHistory
from raysleuth.broker.telemetry.timeline import Timeline
from raysleuth.broker.tickets import TicketStore
from raysleuth.broker.workers.agents import Agents
from raysleuth.broker.workers.control import Control
from raysleuth.broker.workers.inbox import Inbox
from raysleuth.broker.workers.logs import WorkerLogs
from raysleuth.broker.workers.state_api import StateApiClient
from raysleuth.broker.workers.table import WorkerTable
from raysleuth.shared.errors import SleuthError
from raysleuth.shared.limits import HTTP_HEADER_TIMEOUT_S
from raysleuth.shared.paths import BROKER_FILE
from raysleuth.shared.privfiles import secure_state_dir
from raysleuth.shared.swallow import swallowed

log = logging.getLogger("raysleuth.broker")

STATE_POLL_S = float(os.environ.get("RAYSLEUTH_STATE_POLL_S", "1.0"))
"""Seconds between State API snapshots (each is 4 requests of 5-20 ms)."""

FORGET_AFTER_S = float(os.environ.get("RAYSLEUTH_FORGET_AFTER_S", "60"))
"""How long after a worker ended the registry still keeps its report (death records use it)."""

HOLD_S = float(os.environ.get("RAYSLEUTH_POSTMORTEM_HOLD", "120"))
"""How long a crashed worker waits for an attach while a client watches the stream."""

CHANGES_WAIT_S = 5.0
"""Long-poll window on the registry actor; also how often last_seen refreshes at the latest."""

RETRY_S = 1.0
"""Wait before asking a registry actor that failed again."""

EMITTED_GATHER_S = 0.1
"""After a batch of agents' items, how long the next ones may gather before the broker asks:
one registry call carries the rows of several workers' passes instead of one each."""


class Broker:
    def __init__(self, address: str | None, host: str, port: int, dap_port: int, state_dir: Path) -> None:
        self.address, self.host, self.port, self.dap_port = address, host, port, dap_port
        self.state_dir = state_dir
        fixed = secure_state_dir(state_dir)
        if fixed:
            log.warning(
                "made %d file(s) of %s private (0600, folders 0700); others could read them: %s",
                len(fixed), state_dir, "; ".join(fixed[:5]) + (" ..." if len(fixed) > 5 else ""),
            )  # fmt: skip
        self.token, self.token_file = load_or_create_token(state_dir)
        self.tickets = TicketStore()
        self.started = time.time()
        self.http_url: str | None = None
        self.dap_address: str | None = None
        self.ray_context: Any = None
        """What ray.init returned (Ray's RayContext, untyped here)."""
        self.state_api: StateApiClient | None = None
        self._stop = asyncio.Event()
        self.tasks = OwnedTasks("broker")

        self.audit = AuditLog(state_dir)
        self.hub = hub = EventHub()
        self.crashes = CrashStore(state_dir)
        self.cases = CaseBook(hub, self.crashes)
        self.gpu = GpuHistory()
        self.memory = MemoryWatch(self.gpu, hub)
        self.agents = Agents(HOLD_S)
        self.relays = RelayPool()
        self.table = WorkerTable(hub, self.crashes, self.gpu)
        self.points = PointService(
            PointSet(state_dir), self.agents, hub, lambda: self.table.reports, self.table.live_ids, self.audit
        )
        self.watches = WatchService(self.points, hub, self.tasks, self._live_ranks)
        self.timeline = Timeline(hub)
        self.postmortem = PostMortem(self.crashes, self.timeline, self.table, self.relays, hub)
        self.reruns = Reruns(self.crashes, self.points, self.table, hub, self._job_id)
        self.inspect = Inspections(hub)
        self.inbox = Inbox(self.table, self.timeline, self.points.points, self.postmortem, hub, self.inspect)
        self.leases = LinkLeases(self.relays, self.agents, self.table, hub)
        self.groups = GroupBook(state_dir, self.table.workers)
        self.points.points.resolve_group = self.groups.definition
        self.control = Control(
            self.table, self.agents, self.leases, self.groups, hub=hub, relays=self.relays, audit=self.audit
        )
        self.allstop = AllStop(self.table, self.control, hub, self.tasks)
        self.stacks = StacksService(self.table, self.agents, self.relays, self.timeline, hub)
        self.doctor = Doctor(self.table, self.relays, lambda: (self.host, self.http_url, self.dap_address))
        hub.on("table", lambda _: self.points.publish_listing())
        hub.on("table", lambda _: self.timeline.note_pauses(self.table.workers()))  # stops on the timeline
        hub.on_watched = lambda on: self.tasks.spawn(self.agents.set_watch(on), "telling who watches")

    def __str__(self) -> str:
        return f"Broker[{self.http_url}]"

    def _job_id(self) -> str | None:
        """The broker's own Ray job (where reruns run), once it is connected."""
        if self.ray_context is None:
            return None
        import ray

        return ray.get_runtime_context().get_job_id()

    def status(self) -> dict:
        api = self.state_api
        return {
            "version": __version__,
            "ray_address": self.ray_context.address_info.get("gcs_address") if self.ray_context else None,
            "dashboard": api.url if api else None,
            "dap": self.dap_address,
            "dap_on_http": True,  # oneport.py: DAP sessions are welcome on the HTTP port too
            "links": len(self.leases),
            "state_api": {
                "ok": self.table.state is not None and api is not None and api.last_error is None,
                "error": api.last_error if api else None,
            },
            # What is down now, each with its error, since when and a hint; [] when all answers.
            "degraded": [d for d in [api.degraded() if api else None] if d],
            **self.table.counts(),
            "watchers": self.hub.watchers,
            "crashes": len(self.crashes),
            "started": self.started,
        }

    # --- watch loops ------------------------------------------------------------------------

    async def _watch_registry(self) -> None:
        version = -1
        while not self._stop.is_set():
            try:
                res = await self.agents.changes(version, CHANGES_WAIT_S)
            except Exception as exc:  # noqa: BLE001 - the actor died: start it again
                log.warning("registry actor failed (%s); restarting it", exc)
                await asyncio.sleep(RETRY_S)
                with swallowed(log, "restarting the registry actor"):
                    await self.agents.start()
                    await self.points.push()
                    await self.agents.set_watch(self.hub.watchers > 0)
                version = -1
                continue
            version = res["version"]
            sampled = self.gpu.add_reports(res["reports"])
            for wid in sampled:
                row = self.gpu.row(wid)
                self.hub.publish("gpu", dict(row, samples=row["samples"][-8:]))  # the newest only
            self.table.take_reports(res["reports"])
            if sampled:
                self.memory.check(sampled, {w.id: w for w in self.table.workers()})

    async def _watch_state(self) -> None:
        api = self.state_api
        assert api is not None  # run() made it
        while not self._stop.is_set():
            snap = await api.snapshot()
            if snap is not None:
                self.take_snapshot(snap)
            else:
                self.table.recompute()  # agents that went silent still turn stale
            if gone := self.table.forgettable(FORGET_AFTER_S):
                with swallowed(log, "asking the registry to forget %d ended workers", len(gone)):
                    await self.agents.forget(gone)
            if await _wait(self._stop, STATE_POLL_S):
                return

    def take_snapshot(self, snap) -> None:
        self.postmortem.note_deaths(snap, self.table.reports)
        self.relays.ensure(snap.nodes)
        self.table.take_snapshot(snap)

    async def _watch_emitted(self) -> None:
        seq = -1
        while not self._stop.is_set():
            try:
                res = await self.agents.emitted(seq, CHANGES_WAIT_S)
            except Exception as exc:  # noqa: BLE001 - _watch_registry restarts the actor
                log.info("emitted: %s", exc)
                await asyncio.sleep(RETRY_S)
                seq = -1
                continue
            items = [] if seq == -1 else res["items"]  # a fresh start: earlier items are not news
            if seq != -1 and res.get("lost"):
                log.warning("%d logpoint lines or snapshot rows were dropped", res["lost"])
            seq = res["seq"]
            for item in items:
                with swallowed(log, "routing an item from an agent", level=logging.ERROR):
                    self.inbox.route(item)
            if items and await _wait(self._stop, EMITTED_GATHER_S):
                return

    # --- serving ----------------------------------------------------------------------------

    def _live_ranks(self, job_id: str) -> set[int]:
        """The ranks of a job's live workers with an agent (a watch compares a pass once all got there)."""
        return {
            w.rank
            for w in self.table.workers()
            if w.job_id == job_id and w.live and w.agent and w.rank is not None
        }

    async def run(self, ready_out) -> None:
        self.ray_context = await asyncio.to_thread(connect_ray, self.address)
        self.state_api = api = StateApiClient(self.ray_context.dashboard_url)
        await self.agents.start()
        await self.points.push()
        await self.agents.set_watch(self.hub.watchers > 0)
        first = await api.snapshot()
        if first is not None:
            self.take_snapshot(first)
        else:
            log.warning(
                "Ray's State API is unreachable (%s): only workers with the agent will be listed",
                api.last_error,
            )
            self.table.recompute()

        services = Services(
            token=self.token,
            token_file=self.token_file,
            hub=self.hub,
            table=self.table,
            status=self.status,
            points=self.points,
            timeline=self.timeline,
            crashes=self.crashes,
            gpu=self.gpu,
            control=self.control,
            doctor=self.doctor,
            stacks=self.stacks,
            worker_logs=WorkerLogs(self.table, self.relays),
            settings=self.allstop,
            inspections=self.inspect,
            cases=self.cases,
            watches=self.watches,
            groups=self.groups,
            reruns=self.reruns,
            audit=self.audit,
            tickets=self.tickets,
        )
        # keepalive_timeout: a request's head must come within it of the previous answer (#37).
        runner = web.AppRunner(
            make_app(services), access_log=None, handle_signals=False, keepalive_timeout=HTTP_HEADER_TIMEOUT_S
        )
        await runner.setup()
        assert runner.server is not None  # setup() made it
        door = DapFrontDoor(
            self.token, self.token_file, self.table, self.leases, self.crashes, self.agents, self.tickets
        )
        door.audit = self.audit  # each accepted attach is a line of it (dap_session.py)
        # The HTTP port takes DAP sessions too (oneport.py): a remote broker needs one tunnel.
        gate = Gate(vouch=functools.partial(bearer_in, token=self.token))  # every port's connections
        door.gate = gate
        http_server = await serve_one_port(runner.server, door.handle, self.host, self.port, gate)
        http_port = http_server.sockets[0].getsockname()[1]
        self.http_url = f"http://{url_host(self.host)}:{http_port}"
        if warning := exposure_warning(self.host):
            log.warning("%s", warning)
        dap_server = await serve_one_port(runner.server, door.handle, self.host, self.dap_port, gate)
        self.dap_address = f"{url_host(self.host)}:{dap_server.sockets[0].getsockname()[1]}"

        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._stop.set)
        for watch in (self._watch_registry, self._watch_state, self._watch_emitted):
            self.tasks.spawn(watch(), watch.__name__)

        ready = {
            "ready": True,
            "http": self.http_url,
            "dap": self.dap_address,
            "token_file": str(self.token_file),
            "pid": os.getpid(),
            "ray_address": self.status()["ray_address"],
            "version": __version__,
            "python": sys.executable,
        }
        broker_file = self.state_dir / BROKER_FILE
        write_json(broker_file, ready)
        ready_out.write(json.dumps(ready) + "\n")
        ready_out.flush()
        log.info("%s ready; DAP at %s", self, self.dap_address)
        try:
            await self._stop.wait()
        finally:
            log.info("%s stopping", self)
            remove_if_ours(broker_file)
            http_server.close()
            await self._shutdown(runner, dap_server)

    async def _shutdown(self, runner, dap_server) -> None:
        with swallowed(log, "resuming paused workers at stop", level=logging.INFO):
            await asyncio.wait_for(self.control.resume_all_waiting(), 3)
        await self.leases.close_all()
        await self.stacks.close()
        await self.tasks.close()
        await self.relays.close()
        await self.postmortem.close()
        await self.reruns.close()
        self.hub.on_watched = None
        self.hub.close()
        dap_server.close()
        await asyncio.wait_for(runner.cleanup(), 3)
        if self.state_api is not None:
            await self.state_api.close()
        await asyncio.to_thread(self.agents.stop)
        await asyncio.to_thread(shutdown_ray)


async def _wait(event: asyncio.Event, timeout: float) -> bool:
    """Wait for `event` up to `timeout` s; True when it is set."""
    try:
        await asyncio.wait_for(event.wait(), timeout)
    except asyncio.TimeoutError:
        return False
    return True


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
