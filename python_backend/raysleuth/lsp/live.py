"""The language server's view of the live cluster: it follows one broker's /v1/stream (workers,
breakpoints, crashes) and reconnects when the broker goes away or first appears.

A client of the broker like `raysleuth.client`: finds it by --broker URL, RAYSLEUTH_BROKER or
`<state dir>/broker.json`; token from RAYSLEUTH_TOKEN or the token file. Never raises into the server.
Every connection is checked before the request's first byte, as the CLI's (`CheckedConnector`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from aiohttp.connector import Connection
from aiohttp.tracing import Trace

from raysleuth.client import BrokerClient
from raysleuth.model.worker import Worker
from raysleuth.shared.errors import SleuthError
from raysleuth.shared.peer import check_broker_peer

log = logging.getLogger(__name__)

OWNER = "lsp"
"""Owner of the cluster breakpoints the language server sets (its quick fixes)."""
RETRY_S = (0.5, 1.0, 2.0, 5.0)
"""Waits between reconnect attempts: quick at first, then every 5 s."""
READ_TIMEOUT_S = 60.0
"""A stream that sends nothing (not even the broker's keepalive, every 15 s) for this long is dead."""


@dataclass(frozen=True)
class BrokerOptions:
    """Where to find the broker: the client's settings, else the CLI's rules."""

    broker: str | None = None
    #: URL (--broker, initializationOptions.brokerAddress); else RAYSLEUTH_BROKER, else broker.json.
    state_dir: str | None = None
    #: Folder of broker.json and the token (default ~/.raysleuth).
    token_file: str | None = None
    #: Token file that overrides the state dir's (initializationOptions.tokenFile).

    def discover(self) -> BrokerClient:
        url = self.broker or os.environ.get("RAYSLEUTH_BROKER")
        if self.token_file and url:
            client = BrokerClient(url, self._read_token())
            client.verify(f"{url} with raySleuth.tokenFile")
            return client
        client = BrokerClient.discover(self.broker, self.state_dir)
        if self.token_file:
            client.token = self._read_token()
            client.verify(f"{client.url} with raySleuth.tokenFile")
        return client

    def _read_token(self) -> str:
        try:
            return Path(self.token_file or "").expanduser().read_text().strip()
        except OSError as exc:
            raise SleuthError(
                f"Cannot read the broker token at {self.token_file} ({exc.strerror}).",
                "Fix raySleuth.tokenFile, or clear it to use the state dir's token.",
            ) from exc


class LiveCluster:
    """Workers, breakpoints and crashes as the broker last said, and whether it is connected.

    `on_change(kind)` runs on the event loop after each update ("workers", "breakpoints",
    "crashes"); `on_status(connected, message)` when the connection comes or goes.
    """

    def __init__(
        self,
        options: BrokerOptions,
        on_change: Callable[[str], None],
        on_status: Callable[[bool, str], None],
    ) -> None:
        self.options = options
        self.on_change = on_change
        self.on_status = on_status
        self.workers: list[Worker] = []
        self.breakpoints: list[dict] = []
        self.crashes: list[dict] = []
        self.connected = False
        self.url: str | None = None
        self._token: str | None = None
        self._session: aiohttp.ClientSession | None = None
        self._said: tuple[bool, str] | None = None

    def __str__(self) -> str:
        return f"LiveCluster[{self.url or 'no broker'}]"

    async def run(self) -> None:
        """Follow the broker until cancelled, reconnecting with backoff."""
        attempt = 0
        async with aiohttp.ClientSession(connector=CheckedConnector()) as session:
            self._session = session
            while True:
                try:
                    client = self.options.discover()
                    self.url, self._token = client.url, client.token
                    await self._follow(session)
                    attempt = 0
                    message = f"The broker at {self.url} closed the stream; reconnecting."
                except SleuthError as exc:
                    message = f"No broker connected: {exc.message} {exc.hint or ''}".strip()
                except (aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError) as exc:
                    message = (
                        f"No broker connected: cannot reach {self.url} ({exc or type(exc).__name__}). "
                        'Start one with "raysleuth broker" or set raySleuth.brokerAddress.'
                    )
                self._set_connected(False, message)
                await asyncio.sleep(RETRY_S[min(attempt, len(RETRY_S) - 1)])
                attempt += 1

    async def _follow(self, session: aiohttp.ClientSession) -> None:
        self.breakpoints = await self._get(session, "/v1/breakpoints")
        self.crashes = await self._get(session, "/v1/crashes")
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=5, sock_read=READ_TIMEOUT_S)
        async with session.get(f"{self.url}/v1/stream", headers=self._headers(), timeout=timeout) as resp:
            await _raise_for(resp, self.url)
            self._set_connected(True, f"Connected to the broker at {self.url}.")
            self.on_change("breakpoints")
            self.on_change("crashes")
            event, data = None, []
            async for raw in resp.content:
                line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                if line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:"):
                    data.append(line[5:].lstrip())
                elif not line:
                    if event and data:
                        await self._dispatch(session, event, "\n".join(data))
                    event, data = None, []

    async def _dispatch(self, session: aiohttp.ClientSession, event: str, data: str) -> None:
        if event == "workers":
            self.workers = [Worker.from_json(w) for w in json.loads(data)]
            self.on_change("workers")
        elif event == "breakpoints":
            self.breakpoints = json.loads(data)
            self.on_change("breakpoints")
        elif event == "crash":
            self.crashes = await self._get(session, "/v1/crashes")
            self.on_change("crashes")

    async def set_breakpoint(self, path: str, line: int) -> None:
        """Add a cluster breakpoint at `path:line` (1-based), keeping the server's others there."""
        if not self.connected or self._session is None:
            raise SleuthError("No broker connected.", 'Start one with "raysleuth broker".')
        mine = [
            {k: v for k, v in bp.items() if k in ("line", "condition", "hitCondition", "logMessage", "ranks")}
            for bp in await self._get(self._session, "/v1/breakpoints")
            if bp.get("path") == path and bp.get("owner") == OWNER and bp.get("line") != line
        ]
        body = {"path": path, "owner": OWNER, "breakpoints": [*mine, {"line": line}]}
        async with self._session.put(
            f"{self.url}/v1/breakpoints", json=body, headers=self._headers()
        ) as resp:
            await _raise_for(resp, self.url)

    async def _get(self, session: aiohttp.ClientSession, path: str):
        async with session.get(f"{self.url}{path}", headers=self._headers(), timeout=_SHORT) as resp:
            await _raise_for(resp, self.url)
            return await resp.json()

    def _headers(self) -> dict:
        return {"Authorization": f"Bearer {self._token}"}

    def _set_connected(self, connected: bool, message: str) -> None:
        self.connected = connected
        if self._said is None or self._said[0] != connected:  # say it once per change
            self._said = (connected, message)
            log.info("%s", message)
            self.on_status(connected, message)
            if not connected and (self.workers or self.breakpoints or self.crashes):
                self.workers, self.breakpoints, self.crashes = [], [], []  # stale once the broker is gone
                self.on_change("workers")
                self.on_change("breakpoints")


_SHORT = aiohttp.ClientTimeout(total=10)


class CheckedConnector(aiohttp.TCPConnector):
    """aiohttp's connector, but the peer of each connection it hands out must be a process of ours
    (or root's) on loopback (`shared/peer.py`): aiohttp writes a request (headers, token) only once
    `connect` returned its connection, so a refused one carries nothing. No proxy (the session's
    trust_env stays off)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._checked: weakref.WeakSet = weakref.WeakSet()
        """The connections (their protocols) already checked: one check per TCP connection."""

    async def connect(
        self, req: aiohttp.ClientRequest, traces: list[Trace], timeout: aiohttp.ClientTimeout
    ) -> Connection:
        conn = await super().connect(req, traces, timeout)
        if conn.protocol in self._checked:  # a pooled connection, checked when it was made
            return conn
        sock = conn.transport.get_extra_info("socket") if conn.transport is not None else None
        try:
            if sock is None:
                raise SleuthError(f"The connection to {req.url.host} closed at once.", None)
            host = req.url.host or ""
            check_broker_peer(sock, f"{f'[{host}]' if ':' in host else host}:{req.url.port}")
        except SleuthError:
            conn.close()  # not back to the pool
            raise
        self._checked.add(conn.protocol)
        return conn


async def _raise_for(resp: aiohttp.ClientResponse, url: str | None) -> None:
    if resp.status < 400:
        return
    try:
        body = await resp.json()
    except (aiohttp.ContentTypeError, ValueError):
        body = {}
    err = SleuthError(body.get("error") or f"HTTP {resp.status} from {url}", body.get("hint"))
    err.status = resp.status
    raise err
