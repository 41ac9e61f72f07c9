"""A small asyncio DAP client: the terminal debugger (`raysleuth attach`) and the tests use it.

Requests return their response; events queue up until someone waits for them.
"""

from __future__ import annotations

import asyncio
import contextlib

from raysleuth.dap.framing import encode, read_message


class DapError(Exception):
    """A request failed: the adapter's message."""


class DapClient:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.seq = 0
        self.pending: dict[int, asyncio.Future] = {}
        self.events: list[dict] = []
        self._event_added = asyncio.Condition()
        self.closed = asyncio.Event()
        self._task = asyncio.create_task(self._read())

    @classmethod
    async def connect(cls, host: str, port: int) -> DapClient:
        reader, writer = await asyncio.open_connection(host, port)
        return cls(reader, writer)

    async def _read(self) -> None:
        try:
            while True:
                msg = await read_message(self.reader)
                if msg is None:
                    break
                if msg.get("type") == "response":
                    fut = self.pending.pop(msg.get("request_seq"), None)
                    if fut and not fut.done():
                        fut.set_result(msg)
                elif msg.get("type") == "event":
                    async with self._event_added:
                        self.events.append(msg)
                        self._event_added.notify_all()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self.closed.set()
            for fut in self.pending.values():
                if not fut.done():
                    fut.set_exception(ConnectionError("the DAP connection closed"))
            async with self._event_added:
                self._event_added.notify_all()

    async def send_request(self, command: str, arguments: dict | None = None) -> asyncio.Future:
        """Send without waiting; await the returned future for the response."""
        self.seq += 1
        fut = asyncio.get_running_loop().create_future()
        self.pending[self.seq] = fut
        msg = {"seq": self.seq, "type": "request", "command": command}
        if arguments is not None:
            msg["arguments"] = arguments
        self.writer.write(encode(msg))
        await self.writer.drain()
        return fut

    async def request(
        self, command: str, arguments: dict | None = None, timeout: float = 60.0, check: bool = True
    ) -> dict:
        fut = await self.send_request(command, arguments)
        resp = await asyncio.wait_for(fut, timeout)
        if check and not resp.get("success"):
            raise DapError(resp.get("message") or f"{command} failed")
        return resp

    async def wait_event(
        self, name: str, predicate=None, timeout: float = 30.0, consume: bool = True
    ) -> dict:
        """The first queued event named `name` (matching `predicate`), waiting up to `timeout`."""

        def find():
            for i, ev in enumerate(self.events):
                if ev.get("event") == name and (predicate is None or predicate(ev.get("body") or {})):
                    return i, ev
            return None

        async def wait():
            async with self._event_added:
                while True:
                    hit = find()
                    if hit is not None:
                        if consume:
                            del self.events[hit[0]]
                        return hit[1]
                    if self.closed.is_set():
                        raise ConnectionError(f"the DAP connection closed before a {name!r} event")
                    await self._event_added.wait()

        return await asyncio.wait_for(wait(), timeout)

    async def next_event(self, timeout: float | None = None) -> dict:
        """The oldest queued event of any name."""

        async def wait():
            async with self._event_added:
                while not self.events:
                    if self.closed.is_set():
                        raise ConnectionError("the DAP connection closed")
                    await self._event_added.wait()
                return self.events.pop(0)

        return await asyncio.wait_for(wait(), timeout)

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(Exception):
            await self.writer.wait_closed()
        self._task.cancel()


async def open_session(
    host: str,
    port: int,
    attach: dict,
    breakpoints: dict[str, list] | None = None,
    exception_filters: list[str] | None = None,
    timeout: float = 90.0,
) -> DapClient:
    """initialize → attach → (setBreakpoints…) → configurationDone, as an editor does."""
    c = await DapClient.connect(host, port)
    await c.request(
        "initialize",
        {
            "clientID": "raysleuth-cli",
            "adapterID": "raysleuth",
            "linesStartAt1": True,
            "columnsStartAt1": True,
            "pathFormat": "path",
        },
    )
    await c.request("attach", attach, timeout=timeout)
    await c.wait_event("initialized", timeout=timeout)
    for path, bps in (breakpoints or {}).items():
        await c.request("setBreakpoints", {"source": {"path": path}, "breakpoints": bps})
    if exception_filters is not None:
        await c.request("setExceptionBreakpoints", {"filters": exception_filters})
    await c.request("configurationDone", {})
    return c
