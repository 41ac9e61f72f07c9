"""Byte transports for a `DapChannel`: a socket's `StreamWriter`, or async calls (the broker's
node relay, whose Ray calls carry the bytes), plus the long-poll pump that feeds a reader from
such calls. Standard library only: it must never import the broker or the agent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
from collections.abc import Awaitable, Callable
from typing import Any

from raysleuth.shared.swallow import swallow_exception

log = logging.getLogger(__name__)

CLOSE_FLUSH_S = 5.0
"""How long closing waits for output the peer has not read yet; then the connection is dropped
(a peer that never reads would otherwise hold it, and its task, for ever)."""


RESET_ON_CLOSE = struct.pack("ii", 1, 0)
"""SO_LINGER on, 0 s: closing the socket resets the connection (RST) instead of sending FIN."""


def reset(transport: asyncio.WriteTransport) -> None:
    """Drop a socket's connection now, with a reset. A plain close (asyncio's `abort()` is one)
    queues the FIN behind the output the peer has not read: a peer that never reads never gets
    it, and its kernel keeps the half-closed connection open, unread bytes and all (#37: a DAP
    client flooding without reading saw no close in 20 s). The reset reaches it at once."""
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):  # not a TCP socket, or already closed
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, RESET_ON_CLOSE)
    transport.abort()


class Overrun(ConnectionError):
    """The peer did not read what was sent to it: the connection was dropped."""


class Transport:
    """Where a channel's bytes go. `send` must hand the bytes on (or queue them) in call order
    before its first await, so that messages leave in seq order without a lock held across the
    round trip of a relay call."""

    max_unsent: int | None = None
    """Bytes sent but not yet taken by the peer that the transport may hold (None: no bound);
    past it `send` drops the connection and raises Overrun."""

    async def send(self, data: bytes) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        return None

    def abort(self) -> None:
        """Drop the connection at once, unsent output and all."""
        return None


class StreamTransport(Transport):
    """An `asyncio.StreamWriter`: a TCP connection (the front door, `DapClient.connect`)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self._drain = asyncio.Lock()

    async def send(self, data: bytes) -> None:
        unsent = self.writer.transport.get_write_buffer_size()
        if self.max_unsent is not None and unsent and unsent + len(data) > self.max_unsent:
            self.abort()  # the peer does not read: holding more would grow without bound
            raise Overrun(f"the client has not read {unsent} bytes sent to it (at most {self.max_unsent})")
        self.writer.write(data)  # synchronous: the order of calls is the order on the wire
        async with self._drain:
            await self.writer.drain()

    async def close(self) -> None:
        self.writer.close()
        try:
            await asyncio.wait_for(asyncio.shield(self.writer.wait_closed()), CLOSE_FLUSH_S)
        except asyncio.TimeoutError:
            self.abort()
        except (ConnectionError, OSError):
            swallow_exception(log, "waiting for a DAP socket to close", level=logging.DEBUG)

    def abort(self) -> None:
        reset(self.writer.transport)


class CallTransport(Transport):
    """Bytes handed to an async call, e.g. `lambda data: relay.send.remote(conn, data)` (a Ray
    call is submitted when made, so call order is wire order). A call answering `False` means
    the far end is gone."""

    def __init__(
        self,
        send: Callable[[bytes], Awaitable[Any]],
        close: Callable[[], Awaitable[Any]] | None = None,
    ) -> None:
        self._send = send
        self._close = close

    async def send(self, data: bytes) -> None:
        if await self._send(data) is False:
            raise ConnectionError("the far end of the connection is gone")

    async def close(self) -> None:
        if self._close is not None:
            await self._close()


def as_transport(writer: asyncio.StreamWriter | Transport | Callable[[bytes], Awaitable[Any]]) -> Transport:
    if isinstance(writer, Transport):
        return writer
    if isinstance(writer, asyncio.StreamWriter):
        return StreamTransport(writer)
    if callable(writer):
        return CallTransport(writer)
    raise TypeError(f"not a DAP transport: {writer!r}")


async def pump_polls(
    reader: asyncio.StreamReader,
    poll: Callable[[], Awaitable[tuple[bytes, bool]]],
    name: object = "DapChannel",
) -> None:
    """Feed `reader` from long-poll calls (`poll()` returns the bytes buffered and whether the
    connection ended), then end it. A failing call (the relay or its node died) ends it too."""
    try:
        while True:
            data, ended = await poll()
            if data:
                reader.feed_data(data)
            if ended:
                break
    except Exception:  # noqa: BLE001 - the carrier died: the channel ends like a closed socket
        swallow_exception(log, "%s: polling for bytes failed; ending the channel", name, level=logging.INFO)
    reader.feed_eof()
