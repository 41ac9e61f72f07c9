"""One port for a remote broker: the HTTP API and the DAP front door share the HTTP port; and
every connection of every port counted against one cap.

A broker on a remote head node is reached through one tunnel (`ssh -L`, `kubectl
port-forward`), so its HTTP port also takes DAP sessions: a connection whose first bytes are
a DAP header (`Content-Length:`) goes to the front door, any other to the HTTP server once its
first request head is complete (request line and headers, within HTTP_HEADER_TIMEOUT_S of
connecting; aiohttp's keep-alive timeout bounds the wait for each later one). After the hand-over
the switch copies no byte; a thin wrapper only tells the gate when the connection ends.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable
from typing import cast

from raysleuth.broker.auth import check_bearer
from raysleuth.shared.limits import FIRST_BYTES_TIMEOUT_S, HTTP_HEADER_TIMEOUT_S, MAX_CONNECTIONS

log = logging.getLogger(__name__)

DAP_HEADER = b"Content-Length:"
"""Every DAP message starts with this header; no HTTP request does (a method comes first)."""

STREAM_LIMIT = 2**16
"""The StreamReader buffer limit asyncio.start_server uses, so DAP sessions here read alike."""

MAX_HEAD_BYTES = 32 * 1024
"""Longest first HTTP request head (request line and headers) the switch holds; a longer one is
answered 431 (aiohttp's own bound on one line or header is 8190 bytes)."""

METHOD = re.compile(rb"[A-Z]{1,16}( |$)")
"""How an HTTP request head starts; bytes that cannot go to aiohttp at once (it answers 400)."""

REFUSED_LOG_EVERY_S = 60.0
"""At most one log line this often while newcomers are refused (every open connection proven)."""


def bearer_in(head: bytes, token: str) -> bool:
    """Whether an HTTP request head carries `Authorization: Bearer <token>` (constant-time)."""
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"authorization":
            return check_bearer(value.strip().decode("latin-1"), token)
    return False


def _answer(status: str, error: str, hint: str) -> bytes:
    body = json.dumps({"error": error, "hint": hint}).encode()
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nConnection: close\r\n"
    return head.encode() + b"Content-Length: %d\r\n\r\n" % len(body) + body


def _abort(transport: asyncio.BaseTransport) -> None:
    cast(asyncio.Transport, transport).abort()  # every connection here is a socket's


class Gate:
    """Every open connection, all ports together: at most `most`. One more closes the oldest
    that has not proven itself: first those still before their first request head, then DAP
    sessions not attached and HTTP connections that sent no token (`vouch(head)` says whether a
    first head proves its sender; `keep` marks an attached DAP session). When every open one
    has, the newcomer is closed: a crowd cannot lock a real client out, nor push one out."""

    def __init__(self, most: int = MAX_CONNECTIONS, vouch: Callable[[bytes], bool] | None = None) -> None:
        self.most = most
        self.vouch = vouch
        self._waiting: dict[asyncio.BaseTransport, None] = {}  # before their first head, oldest first
        self._open: dict[asyncio.BaseTransport, bool] = {}  # handed over: proven or not, oldest first
        self.evicted = 0
        self.refused = 0
        self._refused_logged = 0.0

    @property
    def open(self) -> int:
        return len(self._waiting) + len(self._open)

    def admit(self, transport: asyncio.BaseTransport) -> bool:
        """Count a new connection, making room for it; False when there is none (it was closed)."""
        while self.open >= self.most:
            victim = next(iter(self._waiting), None)
            if victim is None:
                victim = next((t for t, kept in self._open.items() if not kept), None)
            if victim is None:
                self.refused += 1
                if time.monotonic() - self._refused_logged > REFUSED_LOG_EVERY_S:
                    self._refused_logged = time.monotonic()
                    log.warning("%d connections open, all proven: refusing new ones", self.open)
                _abort(transport)
                return False
            self.leave(victim)
            _abort(victim)
            self.evicted += 1
        self._waiting[transport] = None
        return True

    def handed_over(self, transport: asyncio.BaseTransport, head: bytes = b"") -> None:
        """The connection spoke: it stays counted; it is proven when its head vouches for it."""
        self._waiting.pop(transport, None)
        self._open[transport] = bool(head and self.vouch is not None and self.vouch(head))

    def keep(self, transport: asyncio.BaseTransport) -> None:
        """The connection proved itself (a DAP session attached): never closed to make room."""
        if transport in self._open:
            self._open[transport] = True

    def leave(self, transport: asyncio.BaseTransport) -> None:
        self._waiting.pop(transport, None)
        self._open.pop(transport, None)


class _Counted(asyncio.Protocol):
    """The protocol a connection is handed to, wrapped: tells the gate when it ends."""

    def __init__(self, inner: asyncio.Protocol, gate: Gate, transport: asyncio.BaseTransport) -> None:
        self.inner, self._gate, self._transport = inner, gate, transport

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self._gate.leave(self._transport)
        self.inner.connection_lost(exc)


class FirstBytesSwitch(asyncio.Protocol):
    """One accepted connection until its first bytes say which server takes it (for HTTP: until
    its first request head is complete)."""

    def __init__(
        self,
        http_protocol: Callable[[], asyncio.Protocol],
        dap_handler: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
        gate: Gate | None = None,
    ) -> None:
        self._http_protocol = http_protocol
        self._dap_handler = dap_handler
        self._gate = gate
        self._conn: asyncio.BaseTransport | None = None
        """The connection, for the gate, until it is handed over (then `_Counted` tells the gate)."""
        self._transport: asyncio.Transport | None = None
        """The connection while this switch still reads it."""
        self._head = b""
        self._timers: list[asyncio.TimerHandle] = []

    def __str__(self) -> str:
        peer = self._transport.get_extra_info("peername") if self._transport else None
        return f"FirstBytesSwitch[{peer}]"

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if self._gate is not None and not self._gate.admit(transport):
            return  # no room: closed already
        self._conn = transport
        self._transport = transport  # type: ignore[assignment]
        loop = asyncio.get_running_loop()
        self._timers = [
            loop.call_later(FIRST_BYTES_TIMEOUT_S, self._silent),
            loop.call_later(HTTP_HEADER_TIMEOUT_S, self._slow_head),
        ]

    def close(self) -> None:
        """Close a connection that has not been handed over."""
        if self._transport is not None:
            self._transport.close()

    def _silent(self) -> None:
        if not self._head:
            self.close()

    def _slow_head(self) -> None:
        """The first request head did not come whole in time: 408, closed."""
        if self._transport is not None and DAP_HEADER.startswith(self._head):
            self.close()  # might have been DAP: no HTTP answer
        elif self._transport is not None:
            self._refuse(
                "408 Request Timeout",
                f"The request head did not come whole within {HTTP_HEADER_TIMEOUT_S:g} s.",
                "Send the request line and headers at once.",
            )

    def _refuse(self, status: str, error: str, hint: str) -> None:
        transport = self._transport
        if transport is not None:
            self._transport = None
            transport.write(_answer(status, error, hint))
            transport.close()

    def data_received(self, data: bytes) -> None:
        if self._transport is None:
            return
        seen = len(self._head)
        self._head += data
        if len(self._head) < len(DAP_HEADER) and DAP_HEADER.startswith(self._head):
            return  # could still be either: wait for more
        is_dap = self._head.startswith(DAP_HEADER)
        whole = is_dap or self._head.find(b"\r\n\r\n", max(0, seen - 3)) >= 0
        if not whole and METHOD.match(self._head[:17]):  # an HTTP request head still coming
            if len(self._head) > MAX_HEAD_BYTES:
                self._refuse(
                    "431 Request Header Fields Too Large",
                    f"The request head is over {MAX_HEAD_BYTES} bytes.",
                    "Send fewer or shorter headers.",
                )
            return
        self._hand_over(is_dap)

    def _hand_over(self, is_dap: bool) -> None:
        if is_dap:
            reader = asyncio.StreamReader(limit=STREAM_LIMIT)
            protocol: asyncio.Protocol = asyncio.StreamReaderProtocol(reader, self._dap_handler)
        else:
            protocol = self._http_protocol()
        transport, head = self._transport, self._head
        assert transport is not None
        self._transport, self._conn, self._head = None, None, b""
        self._cancel_timers()
        if self._gate is not None:
            self._gate.handed_over(transport, b"" if is_dap else head)
            protocol = _Counted(protocol, self._gate, transport)
        transport.set_protocol(protocol)
        protocol.connection_made(transport)
        protocol.data_received(head)
        log.debug("a connection on the HTTP port speaks %s", "DAP" if is_dap else "HTTP")

    def _cancel_timers(self) -> None:
        for timer in self._timers:
            timer.cancel()
        self._timers = []

    def eof_received(self) -> bool | None:
        return None  # closed before it said anything whole: nothing to hand over

    def connection_lost(self, exc: Exception | None) -> None:
        conn, self._conn, self._transport = self._conn, None, None
        self._cancel_timers()
        if self._gate is not None and conn is not None:
            self._gate.leave(conn)


async def serve_one_port(
    http_protocol: Callable[[], asyncio.Protocol],
    dap_handler: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
    host: str,
    port: int,
    gate: Gate | None = None,
) -> asyncio.Server:
    """Listen on host:port for both HTTP (`http_protocol`, aiohttp's `runner.server`) and DAP;
    a connection silent for FIRST_BYTES_TIMEOUT_S, or whose first HTTP request head is not whole
    after HTTP_HEADER_TIMEOUT_S, is closed, and `gate` bounds how many are open."""
    loop = asyncio.get_running_loop()
    return await loop.create_server(
        lambda: FirstBytesSwitch(http_protocol, dap_handler, gate), host, port, reuse_address=True
    )
