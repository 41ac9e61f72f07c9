"""Broker-side debugpy connections: at most one per worker, reached through its node's relay.

A `WorkerLink` is a DAP client of the worker's debugpy. Editor sessions lease it: when a session
ends, the link (and the worker's listener) stays, so the next session attaches at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from raysleuth.dap.framing import FramingError, encode, read_message
from raysleuth.errors import SleuthError

log = logging.getLogger(__name__)

RECV_WAIT_S = 10.0
"""Long-poll window of one relay `recv` call."""

REQUEST_TIMEOUT_S = 60.0
"""Longest wait for debugpy's answer to one request (pydevd itself takes ~44 ms)."""


class LinkClosed(SleuthError):
    pass


class WorkerLink:
    def __init__(self, broker, worker: dict) -> None:
        self.broker = broker
        self.worker = dict(worker)
        self.worker_id = worker["id"]
        self.relay = None
        self.conn: int | None = None
        self.seq = 0
        self.pending: dict[int, asyncio.Future] = {}
        self.stopped: dict[int, dict] = {}
        """Threads debugpy reported stopped (thread id → stopped event body), until continued."""
        self.paused_at: dict | None = None
        self.lease = None
        """The editor session using this link now, if any."""
        self.closed = asyncio.Event()
        self.close_reason: str | None = None
        self.capabilities: dict = {}
        self._initialized = asyncio.Event()
        self._reader = asyncio.StreamReader()
        self._tasks: list[asyncio.Task] = []
        self.via_ray_breakpoint = False

    def __str__(self) -> str:
        w = self.worker
        return f"WorkerLink[rank={w.get('rank')} pid={w.get('pid')} node={str(w.get('node_id'))[:4]}]"

    # --- opening ----------------------------------------------------------------------------

    async def open(self, progress=None) -> None:
        say = progress or (lambda _msg: None)
        host, port = await self._listener(say)
        self.relay = await self.broker.relay_for(self.worker.get("node_id"))
        res = await self.relay.open.remote(host, port)
        if not res.get("ok"):
            raise SleuthError(
                f"The node relay could not reach {self}'s debugger: {res.get('error')}",
                "The worker may have just exited; refresh the worker list.",
            )
        self.conn = res["conn"]
        self._tasks = [asyncio.create_task(self._pump()), asyncio.create_task(self._dispatch())]
        say("handshake with debugpy ...")
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
        attach = asyncio.create_task(
            self.request(
                "attach",
                {"justMyCode": False, "subProcess": False, "redirectOutput": False, "name": str(self)},
            )
        )
        await asyncio.wait_for(self._initialized.wait(), REQUEST_TIMEOUT_S)
        await self.request("setExceptionBreakpoints", {"filters": []})
        await self.request("configurationDone", {})
        await attach
        say("attached")

    async def _listener(self, say) -> tuple[str, int]:
        port = self.broker.ray_debugger_ports.get(self.worker_id)
        if port and not self.worker.get("agent"):
            # No agent, paused in Ray's own breakpoint(): Ray's debugpy listens on the node's address.
            self.via_ray_breakpoint = True
            return self.worker.get("node_ip") or "127.0.0.1", int(port)
        if not self.worker.get("agent"):
            raise SleuthError(
                f"Worker pid {self.worker.get('pid')} has no Ray Sleuth agent and is not paused in "
                "breakpoint(), so there is no debugger to attach to.",
                "Start the cluster with RAYSLEUTH=1 (or the runtime_env setup hook) and restart the job.",
            )
        say("opening the worker's debugger on 127.0.0.1 ...")
        res = await self.broker.registry.command.remote(self.worker_id, {"op": "listen"}, 60.0)
        if not res.get("ok"):
            raise SleuthError(
                f"Opening the debugger in {self} failed: {res.get('error')}",
                "See raysleuth-agent-<pid>.log in the Ray session's log folder.",
            )
        return res["host"], int(res["port"])

    # --- bytes in and out -------------------------------------------------------------------

    async def _pump(self) -> None:
        try:
            while True:
                data, ended = await self.relay.recv.remote(self.conn, RECV_WAIT_S)
                if data:
                    self._reader.feed_data(data)
                if ended:
                    break
        except Exception as exc:  # noqa: BLE001 - the relay or its node died
            log.info("%s: relay failed: %s", self, exc)
        self._reader.feed_eof()

    async def _dispatch(self) -> None:
        try:
            while True:
                msg = await read_message(self._reader)
                if msg is None:
                    break
                self._on_message(msg)
        except (FramingError, asyncio.IncompleteReadError) as exc:
            log.warning("%s: bad bytes from debugpy: %s", self, exc)
        await self._closed(self.close_reason or "the worker's debugger connection ended")

    def _on_message(self, msg: dict) -> None:
        if msg.get("type") == "response":
            fut = self.pending.pop(msg.get("request_seq"), None)
            if fut is not None and not fut.done():
                fut.set_result(msg)
            return
        if msg.get("type") != "event":
            return
        event, body = msg.get("event"), msg.get("body") or {}
        if event == "initialized":
            self._initialized.set()
            return
        if event == "stopped":
            tid = body.get("threadId")
            self.stopped[tid] = body
            asyncio.create_task(self._locate_pause(tid, body.get("reason")))
        elif event == "continued":
            if body.get("allThreadsContinued", True):
                self.stopped.clear()
            else:
                self.stopped.pop(body.get("threadId"), None)
            if not self.stopped:
                self.paused_at = None
                self.broker.recompute()
        if self.lease is not None:
            self.lease.forward_event(msg)

    async def _locate_pause(self, thread_id, reason) -> None:
        try:
            st = await self.request("stackTrace", {"threadId": thread_id, "startFrame": 0, "levels": 1})
            frames = (st.get("body") or {}).get("stackFrames") or []
            if frames and thread_id in self.stopped:
                src = frames[0].get("source") or {}
                self.paused_at = {"path": src.get("path"), "line": frames[0].get("line"), "reason": reason}
        except Exception:  # noqa: BLE001
            log.exception("%s: locating the pause failed", self)
        self.broker.recompute()

    async def request(
        self, command: str, arguments: dict | None = None, timeout: float = REQUEST_TIMEOUT_S
    ) -> dict:
        """Send one request to debugpy and return its response (success or not)."""
        if self.closed.is_set():
            raise LinkClosed(f"{self} is closed: {self.close_reason}", "Attach again.")
        self.seq += 1
        seq = self.seq
        fut = asyncio.get_running_loop().create_future()
        self.pending[seq] = fut
        msg = {"seq": seq, "type": "request", "command": command, "arguments": arguments or {}}
        ok = await self.relay.send.remote(self.conn, encode(msg))
        if not ok:
            self.pending.pop(seq, None)
            raise LinkClosed(f"{self}: the debugger connection is gone", "The worker may have exited.")
        try:
            return await asyncio.wait_for(fut, timeout)
        finally:
            self.pending.pop(seq, None)

    # --- closing ----------------------------------------------------------------------------

    async def _closed(self, reason: str) -> None:
        if self.closed.is_set():
            return
        self.close_reason = reason
        self.closed.set()
        for fut in self.pending.values():
            if not fut.done():
                fut.set_exception(LinkClosed(f"{self}: {reason}", "The worker may have exited."))
        self.pending.clear()
        self.stopped.clear()
        self.paused_at = None
        self.broker.links.pop(self.worker_id, None)
        self.broker.recompute()
        if self.lease is not None:
            await self.lease.link_closed(self)

    async def close(self, reason: str = "closed by the broker") -> None:
        self.close_reason = reason
        for t in self._tasks:
            t.cancel()
        if self.relay is not None and self.conn is not None:
            with contextlib.suppress(Exception):
                await self.relay.close.remote(self.conn)
        await self._closed(reason)
