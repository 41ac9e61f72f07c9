"""The broker's WorkerLink over a DapChannel, without Ray: a fake node relay (the actor handle's
`.remote` methods) carries bytes to a fake debugpy, itself a DapChannel server."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from dap_fakes import RelayPipe

from raysleuth.broker.debug.links import LinkClosed, WorkerLink
from raysleuth.dap.channel import DapChannel
from raysleuth.dap.transport import CallTransport
from raysleuth.model.worker import Worker
from raysleuth.shared.errors import SleuthError


class FakeDebugpy:
    """Answers like debugpy: `initialized` after attach, attach answered after configurationDone,
    then the worker stops at /job.py:7."""

    def __init__(self, reader: asyncio.StreamReader, transport: CallTransport) -> None:
        self.requests: list[str] = []
        self._attach: dict | None = None
        self.stall: set[str] = set()
        self.channel = DapChannel(reader, transport, name="debugpy", on_request=self.handle).start()

    async def handle(self, request: dict) -> None:
        command = request["command"]
        self.requests.append(command)
        ch = self.channel
        if command in self.stall:
            return
        if command == "pydevdAuthorize":
            ok = request["arguments"].get("debugServerAccessToken") == "s3cret"
            await ch.respond(request, None, error=None if ok else "Client not authenticated.")
        elif command == "initialize":
            await ch.respond(request, {"supportsConfigurationDoneRequest": True})
        elif command == "attach":
            self._attach = request
            await ch.event("initialized")
        elif command == "configurationDone":
            await ch.respond(request)
            await ch.respond(self._attach)
            await ch.event("stopped", {"threadId": 1, "reason": "breakpoint", "allThreadsStopped": True})
        elif command == "stackTrace":
            await ch.respond(request, {"stackFrames": [{"id": 1, "line": 7, "source": {"path": "/job.py"}}]})
        elif command == "continue":
            await ch.respond(request, {"allThreadsContinued": True})
            await ch.event("continued", {"threadId": 1, "allThreadsContinued": True})
        else:
            await ch.respond(request)


class FakeRelayActor:
    """A relay actor handle: `relay.open.remote(host, port, path=None)`, `send`, `recv`, `close`."""

    def __init__(self) -> None:
        self.opened: list[tuple[str, int]] = []
        self.closed: list[int] = []
        self.debugpy: FakeDebugpy | None = None
        self.pipe = RelayPipe()
        for name in ("open", "send", "recv", "close"):
            setattr(self, name, SimpleNamespace(remote=getattr(self, "_" + name)))

    async def _open(self, host: str | None, port: int | None, path: str | None = None) -> dict:
        self.opened.append((host, port) if path is None else path)
        self.debugpy = FakeDebugpy(self.pipe.to_debugpy, self.pipe.debugpy_transport())
        return {"ok": True, "conn": 1}

    async def _send(self, conn: int, data: bytes) -> bool:
        return self.pipe.send(data)

    async def _recv(self, conn: int, wait: float) -> tuple[bytes, bool]:
        return await self.pipe.recv(wait)

    async def _close(self, conn: int) -> None:
        self.closed.append(conn)
        self.pipe.close()


class FakeLease:
    def __init__(self) -> None:
        self.events: list[dict] = []
        self.closed_links: list = []

    def forward_event(self, msg: dict) -> None:
        self.events.append(msg)

    async def link_closed(self, link) -> None:
        self.closed_links.append(link)


class Collaborators:
    def __init__(self, port: int | None = None) -> None:
        self.relay = FakeRelayActor()
        self.commands: list[tuple] = []
        self.changes = 0
        self.closed: list = []
        self.port = port
        self.token: str | None = None
        self.path: str | None = None

    async def relay_for(self, node_id):
        assert node_id == "node-1"
        return self.relay

    async def command(self, worker_id: str, command: dict, timeout: float) -> dict:
        self.commands.append((worker_id, command, timeout))
        listener = {"path": self.path} if self.path else {"host": "127.0.0.1", "port": 5678}
        return {"ok": True, **listener, **({"token": self.token} if self.token else {})}

    def link(self, **worker) -> WorkerLink:
        w = Worker(**{"id": "w1", "pid": 42, "rank": 3, "node_id": "node-1", "agent": True, **worker})
        return WorkerLink(
            w,
            relays=self,
            agents=self,
            ray_debugger_port=lambda wid: self.port,
            on_change=self.on_change,
            on_closed=self.closed.append,
        )

    def on_change(self) -> None:
        self.changes += 1


async def eventually(cond, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.005)


async def test_open_asks_the_agent_to_listen_and_handshakes_through_the_relay():
    c = Collaborators()
    link = c.link()
    said = []
    await asyncio.wait_for(link.open(said.append), 5)
    assert c.commands == [("w1", {"op": "listen"}, 60.0)]
    assert c.relay.opened == [("127.0.0.1", 5678)]
    assert link.capabilities == {"supportsConfigurationDoneRequest": True}
    handshake = ["initialize", "attach", "setExceptionBreakpoints", "configurationDone"]
    assert c.relay.debugpy.requests[:4] == handshake
    assert said[-1] == "attached" and not link.via_ray_breakpoint


async def test_the_link_sends_the_listeners_token_before_anything_else():
    c = Collaborators()
    c.token, c.path = "s3cret", "/tmp/rs-dbg-x/dap.sock"
    link = c.link()
    await asyncio.wait_for(link.open(), 5)
    assert c.relay.opened == ["/tmp/rs-dbg-x/dap.sock"]  # the agent's private socket, by the relay
    assert c.relay.debugpy.requests[:2] == ["pydevdAuthorize", "initialize"]
    c2 = Collaborators()
    c2.token = "stale"
    with pytest.raises(SleuthError, match="refused the broker's token: Client not authenticated"):
        await asyncio.wait_for(c2.link().open(), 5)


async def test_a_stop_is_located_forwarded_to_the_lease_and_cleared_by_continue():
    c = Collaborators()
    link = c.link()
    lease = link.lease = FakeLease()
    await asyncio.wait_for(link.open(), 5)
    await eventually(lambda: link.paused_at is not None)
    assert link.paused_at == {"path": "/job.py", "line": 7, "reason": "breakpoint"}
    assert list(link.stopped) == [1] and c.changes >= 1
    assert [e["event"] for e in lease.events] == ["stopped"]  # `initialized` is the link's own
    resp = await link.request("continue", {"threadId": 1})
    assert resp["success"]
    await eventually(lambda: not link.stopped)
    assert link.paused_at is None and lease.events[-1]["event"] == "continued"


async def test_debugpy_going_away_closes_the_link_once_and_tells_the_broker_and_the_lease():
    c = Collaborators()
    link = c.link()
    lease = link.lease = FakeLease()
    await asyncio.wait_for(link.open(), 5)
    await eventually(lambda: link.paused_at is not None)
    c.relay.debugpy.stall.add("evaluate")
    pending = asyncio.create_task(link.request("evaluate", {"expression": "x"}))
    await eventually(lambda: "evaluate" in c.relay.debugpy.requests)
    await c.relay.debugpy.channel.close("the worker exited")
    with pytest.raises(LinkClosed, match="the worker's debugger connection ended"):
        await asyncio.wait_for(pending, 5)
    await asyncio.wait_for(link.closed.wait(), 5)
    assert c.closed == [link] and lease.closed_links == [link]
    assert link.close_reason == "the worker's debugger connection ended"
    assert not link.stopped and link.paused_at is None
    with pytest.raises(LinkClosed, match="is closed"):
        await link.request("threads")


async def test_close_ends_the_relay_connection_and_fails_waiting_requests():
    c = Collaborators()
    link = c.link()
    await asyncio.wait_for(link.open(), 5)
    c.relay.debugpy.stall.add("evaluate")
    pending = asyncio.create_task(link.request("evaluate", {"expression": "x"}))
    await eventually(lambda: "evaluate" in c.relay.debugpy.requests)
    await link.close("idle: no session used it")
    with pytest.raises(LinkClosed, match="idle: no session used it"):
        await pending
    assert c.relay.closed == [1] and c.closed == [link] and link.close_reason == "idle: no session used it"
    await link.close("again")
    assert c.closed == [link]


async def test_a_request_debugpy_does_not_answer_times_out():
    c = Collaborators()
    link = c.link()
    await asyncio.wait_for(link.open(), 5)
    c.relay.debugpy.stall.add("evaluate")
    with pytest.raises(asyncio.TimeoutError):
        await link.request("evaluate", {"expression": "x"}, timeout=0.05)
    assert not link.closed.is_set()


async def test_a_worker_paused_in_rays_breakpoint_is_reached_on_rays_port():
    c = Collaborators(port=6001)
    link = c.link(agent=False, node_ip="10.0.0.2")
    await asyncio.wait_for(link.open(), 5)
    assert link.via_ray_breakpoint and c.relay.opened == [("10.0.0.2", 6001)] and not c.commands


async def test_a_worker_without_agent_or_ray_debugger_cannot_be_opened():
    c = Collaborators()
    with pytest.raises(SleuthError, match="no Ray Sleuth agent"):
        await c.link(agent=False).open()
    link = c.link(agent=False)
    await link.close("open failed")  # what the broker does after a failed open
    assert c.closed == [link] and link.closed.is_set()
