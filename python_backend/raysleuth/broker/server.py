"""The broker process (`raysleuth broker`): connects to Ray, starts the registry actor, merges
agent reports with the State API, and serves the HTTP API and the DAP front door.

Its stdout carries exactly one line, the ready JSON; everything else goes to stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path

from aiohttp import web

from raysleuth import __version__, names
from raysleuth.broker.auth import load_or_create_token
from raysleuth.broker.events import EventHub
from raysleuth.broker.state_api import StateApiClient
from raysleuth.broker.workers import StateSnapshot, comparable, merge_nodes, merge_workers
from raysleuth.errors import SleuthError
from raysleuth.paths import BROKER_FILE

log = logging.getLogger("raysleuth.broker")

STATE_POLL_S = float(os.environ.get("RAYSLEUTH_STATE_POLL_S", "1.0"))
"""Seconds between State API snapshots (each is 4 requests of 5-20 ms)."""

CHANGES_WAIT_S = 5.0
"""Long-poll window on the registry actor; also how often last_seen refreshes at the latest."""


def connect_ray(address: str | None):
    """`ray.init` for the broker: never streams worker logs, never starts a cluster of its own."""
    import ray

    target = address or os.environ.get("RAY_ADDRESS") or "auto"
    hint = ("Start a cluster with `RAYSLEUTH=1 ray start --head`, or pass --address HOST:PORT "
            "(or set RAY_ADDRESS).")
    _probe_gcs(target, hint)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            return ray.init(address=target, namespace=names.NAMESPACE, log_to_driver=False,
                            logging_level=logging.WARNING)
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
    def __init__(self, address: str | None, host: str, port: int, dap_port: int,
                 state_dir: Path) -> None:
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
            "state_api": {"ok": self.state is not None and self.state_api.last_error is None,
                          "error": self.state_api.last_error if self.state_api else None},
            "workers": sum(1 for w in self._workers if w["state"] != "exited"),
            "agents": sum(1 for w in self._workers if w["agent"] and w["state"] != "exited"),
            "watchers": self.hub.watchers,
            "started": self.started,
        }

    def recompute(self) -> None:
        self._workers = merge_workers(self.reports, self.state, time.time())
        view = comparable(self._workers)
        if view != self._published:
            self._published = view
            self.hub.publish("workers", self._workers)

    # --- Ray side ---------------------------------------------------------------------------

    async def start_registry(self) -> None:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from raysleuth.broker.registry_actor import SleuthRegistry

        if self.registry is None:
            await asyncio.to_thread(_refuse_second_broker)
        node_id = ray.get_runtime_context().get_node_id()
        self.registry = SleuthRegistry.options(
            name=names.REGISTRY_ACTOR, namespace=names.NAMESPACE, get_if_exists=True,
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
                version = -1
                continue
            version = res["version"]
            self.reports = res["reports"]
            self.recompute()

    async def _watch_state(self) -> None:
        while not self._stop.is_set():
            snap = await self.state_api.snapshot()
            if snap is not None:
                self.state = snap
            self.recompute()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stop.wait(), STATE_POLL_S)

    # --- serving ----------------------------------------------------------------------------

    async def run(self, ready_out) -> None:
        from raysleuth.broker.dap_front import DapFrontDoor
        from raysleuth.broker.http_api import make_app

        self.ray_context = await asyncio.to_thread(connect_ray, self.address)
        self.state_api = StateApiClient(self.ray_context.dashboard_url)
        await self.start_registry()
        first = await self.state_api.snapshot()
        if first is None:
            log.warning("Ray's State API is unreachable (%s): only workers with the agent will be"
                        " listed", self.state_api.last_error)
        self.state = first
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
        tasks = [asyncio.create_task(self._watch_registry()), asyncio.create_task(self._watch_state())]

        ready = {"ready": True, "http": self.http_url, "dap": self.dap_address,
                 "token_file": str(self.token_file), "pid": os.getpid(),
                 "ray_address": self.status()["ray_address"], "version": __version__}
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
            for t in tasks:
                t.cancel()
            dap_server.close()
            await asyncio.wait_for(runner.cleanup(), 3)
            await self.state_api.close()
            await asyncio.to_thread(self._stop_ray)

    def _stop_ray(self) -> None:
        import ray

        with contextlib.suppress(Exception):
            if self.registry is not None:
                ray.kill(self.registry)
        with contextlib.suppress(Exception):
            ray.shutdown()


def _refuse_second_broker() -> None:
    """One broker per cluster: a live registry actor means another broker owns it."""
    import ray

    try:
        existing = ray.get_actor(names.REGISTRY_ACTOR, namespace=names.NAMESPACE)
        ray.get(existing.ping.remote(), timeout=5)
    except Exception:  # noqa: BLE001 - none, or a dead one: ours to start
        return
    raise SleuthError("Another Ray Sleuth broker already runs for this Ray cluster.",
                      "Use that one (its broker.json is in its state dir on the head node), "
                      "or stop it first.")


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
    logging.basicConfig(stream=sys.stderr, level=os.environ.get("RAYSLEUTH_LOG_LEVEL", "INFO"),
                        format="%(asctime)s broker %(levelname)s %(name)s: %(message)s")
    ready_out = sys.stdout
    sys.stdout = sys.stderr  # stdout carries only the ready line
    broker = Broker(address, host, port, dap_port, state_dir)
    try:
        asyncio.run(broker.run(ready_out))
    except SleuthError as exc:
        print(f"error: {exc.message}\nhint: {exc.hint}", file=sys.stderr)
        return 2
    return 0
