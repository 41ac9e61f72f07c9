"""Broker-side debugpy connections: at most one per worker, reached through its node's relay.

A `WorkerLink` is a DAP client of the worker's debugpy over a `DapChannel` whose bytes ride the
node relay's Ray calls. Editor sessions lease it: when a session ends, the link (and the worker's
listener) stays, so the next session attaches at once. It gets its collaborators in its
constructor and never holds the broker.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from typing import Any, Protocol

from raysleuth.broker.debug import rayframes
from raysleuth.dap.channel import ChannelClosed, DapChannel
from raysleuth.model.worker import Worker
from raysleuth.shared.errors import SleuthError
from raysleuth.shared.swallow import swallow_exception

log = logging.getLogger(__name__)

RECV_WAIT_S = 10.0
"""Long-poll window of one relay `recv` call."""

REQUEST_TIMEOUT_S = 60.0
"""Longest wait for debugpy's answer to one request (pydevd itself takes ~44 ms)."""

PAUSE_FRAMES = 40
"""Frames read to place a stop: the user's innermost is within them past any library's (#38)."""

ENDED_REASON = "the worker's debugger connection ended"


class LinkClosed(SleuthError):
    pass


class Relays(Protocol):
    async def relay_for(self, node_id: str | None) -> Any:
        """The node's relay actor handle (remote methods `open`, `send`, `recv`, `close`)."""


class Agents(Protocol):
    async def command(self, worker_id: str, command: dict, timeout: float) -> dict:
        """One agent command run in the worker (`{"op": "listen"}` opens its debugpy listener)."""


class WorkerLink:
    def __init__(
        self,
        worker: Worker,
        *,
        relays: Relays,
        agents: Agents,
        ray_debugger_port: Callable[[str], int | None],
        on_change: Callable[[], None],
        on_closed: Callable[[WorkerLink], None],
    ) -> None:
        """`ray_debugger_port(worker_id)`: the port of Ray's own debugpy if the worker is paused
        in Ray's breakpoint(); `on_change()`: this link's stopped state changed; `on_closed(link)`:
        the link closed (called once, before the lease hears of it)."""
        self.worker = dataclasses.replace(worker)
        self.worker_id = worker.id
        self._relays = relays
        self._agents = agents
        self._ray_debugger_port = ray_debugger_port
        self._on_change = on_change
        self._on_closed = on_closed
        self.relay = None
        self.conn: int | None = None
        self.channel: DapChannel | None = None
        """DAP to the worker's debugpy, once `open` has reached it."""
        self.stopped: dict[int | None, dict] = {}
        """Threads debugpy reported stopped (thread id → stopped event body), until continued."""
        self.paused_at: dict | None = None
        self.pause_pending: int | None = None
        """Thread asked to pause that has not stopped yet (it is in native code, e.g. idle
        between tasks); a `continue` to it cancels that."""
        self._stop_seen = asyncio.Event()
        """Set while debugpy reports a thread stopped."""
        self.lease = None
        """The editor session using this link now, if any."""
        self.closed = asyncio.Event()
        self.close_reason: str | None = None
        self.capabilities: dict = {}
        self._initialized = asyncio.Event()
        self._tasks: set[asyncio.Task] = set()
        self.via_ray_breakpoint = False
        self._access_token: str | None = None
        """The secret the worker's debugpy wants first (from its agent; None: Ray's own listener)."""

    def __str__(self) -> str:
        w = self.worker
        return f"WorkerLink[rank={w.rank} pid={w.pid} node={str(w.node_id)[:4]}]"

    # --- opening ----------------------------------------------------------------------------

    async def open(self, progress=None) -> None:
        say = progress or (lambda _msg: None)
        where = await self._listener(say)
        if not await self._connect_here(where):
            await self._connect_by_relay(where)
        say("handshake with debugpy ...")
        await self._handshake()
        say("attached")

    async def _connect_here(self, where: dict) -> bool:
        """A worker on the broker's own node: straight to its debugpy's socket (no Ray call per
        message: a request to a stopped worker then costs about what it does locally)."""
        local = getattr(self._relays, "local_node_id", None)
        if local is None or self.worker.node_id != local:
            return False
        try:
            self.channel = await asyncio.wait_for(
                DapChannel.connect(
                    where.get("host"),
                    where.get("port"),
                    path=where.get("path"),
                    name=self,
                    on_event=self._on_event,
                    on_closed=self._channel_closed,
                ),
                REQUEST_TIMEOUT_S,
            )
        except (OSError, asyncio.TimeoutError) as exc:  # e.g. a broker run by another user
            log.info("%s: no direct connection to %s (%s); using the node relay", self, where, exc)
            return False
        return True

    async def _connect_by_relay(self, where: dict) -> None:
        self.relay = relay = await self._relays.relay_for(self.worker.node_id)
        res = await relay.open.remote(where.get("host"), where.get("port"), path=where.get("path"))
        if not res.get("ok"):
            raise SleuthError(
                f"The node relay could not reach {self}'s debugger: {res.get('error')}",
                "The worker may have just exited; refresh the worker list.",
            )
        self.conn = conn = res["conn"]
        # A Ray call is submitted when it is made, so bytes reach the relay in seq order.
        self.channel = DapChannel.over_polls(
            send=lambda data: relay.send.remote(conn, data),
            poll=lambda: relay.recv.remote(conn, RECV_WAIT_S),
            close=lambda: relay.close.remote(conn),
            name=self,
            on_event=self._on_event,
            on_closed=self._channel_closed,
        ).start()

    async def _handshake(self) -> None:
        if self._access_token is not None:
            auth = await self.request("pydevdAuthorize", {"debugServerAccessToken": self._access_token})
            if not auth.get("success"):
                raise SleuthError(
                    f"{self}'s debugger refused the broker's token: {auth.get('message')}",
                    "The worker's agent may have restarted its listener; attach again.",
                )
        init = await self.request(
            "initialize",
            {
                "clientID": "raysleuth-broker",
                "clientName": "Ray Sleuth broker",
                "adapterID": "debugpy",
                "pathFormat": "path",
                "linesStartAt1": True,
                "columnsStartAt1": True,
                "supportsVariableType": True,
                "supportsRunInTerminalRequest": False,
            },
        )
        self.capabilities = init.get("body") or {}
        # debugpy answers attach only after configurationDone, and sends `initialized` before.
        attach = asyncio.create_task(
            self.request(
                "attach",
                {"justMyCode": False, "subProcess": False, "redirectOutput": False, "name": str(self)},
            )
        )
        try:
            await asyncio.wait_for(self._initialized.wait(), REQUEST_TIMEOUT_S)
            await self.request("setExceptionBreakpoints", {"filters": []})
            await self.request("configurationDone", {})
            await attach
        finally:
            if not attach.done():
                attach.cancel()

    async def _listener(self, say) -> dict:
        """Where the worker's debugpy listens: {path} (the agent's private socket) or {host, port}."""
        port = self._ray_debugger_port(self.worker_id)
        if port and not self.worker.agent:
            # No agent, paused in Ray's own breakpoint(): Ray's debugpy listens on the node's address.
            self.via_ray_breakpoint = True
            return {"host": self.worker.node_ip or "127.0.0.1", "port": int(port)}
        if not self.worker.agent:
            raise SleuthError(
                f"Worker pid {self.worker.pid} has no Ray Sleuth agent and is not paused in "
                "breakpoint(), so there is no debugger to attach to.",
                "Start the cluster with RAYSLEUTH=1 (or the runtime_env setup hook) and restart the job.",
            )
        say("opening the worker's debugger ...")
        res = await self._agents.command(self.worker_id, {"op": "listen"}, 60.0)
        if not res.get("ok"):
            raise SleuthError(
                f"Opening the debugger in {self} failed: {res.get('error')}",
                "See raysleuth-agent-<pid>.log in the Ray session's log folder.",
            )
        self._access_token = res.get("token")
        if res.get("path"):
            return {"path": str(res["path"])}
        return {"host": res["host"], "port": int(res["port"])}

    # --- what debugpy says ------------------------------------------------------------------

    def _on_event(self, msg: dict) -> None:
        event, body = msg.get("event"), msg.get("body") or {}
        if event == "initialized":
            self._initialized.set()
            return
        if event == "stopped":
            tid = body.get("threadId")
            self.stopped[tid] = body
            self.pause_pending = None
            self._stop_seen.set()
            self._spawn(self._locate_pause(tid, body.get("reason")))
        elif event == "continued":
            if body.get("allThreadsContinued", True):
                self.stopped.clear()
            else:
                self.stopped.pop(body.get("threadId"), None)
            if not self.stopped:
                self.paused_at = None
                self._stop_seen.clear()
                self._on_change()
        if self.lease is not None:
            self.lease.forward_event(msg)

    async def step(self, kind: str, thread_id, timeout: float) -> bool:
        """Step the thread that stopped (`next`, `stepIn`, `stepOut`); whether it stops again
        within `timeout` s (a rank inside a collective waiting for another does not)."""
        self.stopped.pop(thread_id, None)
        if not self.stopped:
            self._stop_seen.clear()
        await self.request(kind, {"threadId": thread_id})
        return await self.wait_stopped(timeout)

    async def wait_stopped(self, timeout: float) -> bool:
        """Whether a thread of the worker is (or within `timeout` s gets) stopped."""
        try:
            await asyncio.wait_for(self._stop_seen.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return bool(self.stopped)

    def _spawn(self, coro) -> None:
        t = asyncio.create_task(coro)
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)

    async def _locate_pause(self, thread_id, reason) -> None:
        try:
            # The user's innermost frame, not a library's (a raise inside torch, verl's wrappers:
            # issue #38): the first frames, dimmed as the editor gets them.
            levels = {"threadId": thread_id, "startFrame": 0, "levels": PAUSE_FRAMES}
            st = await self.request("stackTrace", levels)
            shown = rayframes.tidy("stackTrace", st.get("body") or {}).get("stackFrames") or []
            top = rayframes.user_top(shown)
            if top is not None and thread_id in self.stopped:
                src = top.get("source") or {}
                self.paused_at = {"path": src.get("path"), "line": top.get("line"), "reason": reason}
        except LinkClosed:
            swallow_exception(log, "%s: locating the pause: the link closed", self, level=logging.DEBUG)
        except Exception:  # noqa: BLE001
            log.exception("%s: locating the pause failed", self)
        self._on_change()

    async def request(
        self, command: str, arguments: dict | None = None, timeout: float = REQUEST_TIMEOUT_S
    ) -> dict:
        """Send one request to debugpy and return its response (success or not).

        Raises LinkClosed when the link is (or gets) closed, DapTimeout (an asyncio.TimeoutError)
        when debugpy does not answer in `timeout` s.
        """
        if self.closed.is_set() or self.channel is None:
            raise LinkClosed(f"{self} is closed: {self.close_reason or 'not open'}", "Attach again.")
        try:
            return await self.channel.request(command, arguments or {}, timeout=timeout)
        except ChannelClosed as exc:
            if not self.channel.closed.is_set():  # the relay says the connection is gone
                raise LinkClosed(
                    f"{self}: the debugger connection is gone", "The worker may have exited."
                ) from exc
            reason = self.close_reason or exc.reason
            raise LinkClosed(f"{self}: {reason}", "The worker may have exited.") from exc

    # --- closing ----------------------------------------------------------------------------

    async def _channel_closed(self, reason: str) -> None:
        # Our own close() set close_reason first; otherwise debugpy's end went away.
        await self._closed(self.close_reason or ENDED_REASON)

    async def _closed(self, reason: str) -> None:
        if self.closed.is_set():
            return
        self.close_reason = reason
        self.closed.set()
        self.stopped.clear()
        self.paused_at = None
        self._on_closed(self)
        if self.lease is not None:
            await self.lease.link_closed(self)

    async def close(self, reason: str = "closed by the broker") -> None:
        """Close the relay connection; requests waiting fail with LinkClosed(reason)."""
        self.close_reason = reason
        for t in list(self._tasks):
            t.cancel()
        if self.channel is not None:
            await self.channel.close(reason)  # its on_closed runs self._closed
        await self._closed(reason)
