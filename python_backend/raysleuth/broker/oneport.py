"""One port for a remote broker: the HTTP API and the DAP front door share the HTTP port.

A broker on a remote head node is reached through one tunnel (`ssh -L`, `kubectl
port-forward`), so its HTTP port also takes DAP sessions: a connection whose first bytes are
a DAP header (`Content-Length:`) goes to the front door, any other to the HTTP server. The
switch looks at the first bytes only, then hands the socket over: it never copies a byte
after that. (The DAP port of its own stays, for clients that know it.)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from raysleuth.shared.limits import FIRST_BYTES_TIMEOUT_S, MAX_CONNECTIONS

log = logging.getLogger(__name__)

DAP_HEADER = b"Content-Length:"
"""Every DAP message starts with this header; no HTTP request does (a method comes first)."""

STREAM_LIMIT = 2**16
"""The StreamReader buffer limit asyncio.start_server uses, so DAP sessions here read alike."""


class Gate:
    """Connections that have not said anything yet, all ports together: at most `most`; one more
    closes the oldest of them (a crowd of silent connections cannot lock a real client out, who
    speaks at once). Connections that spoke are the HTTP server's and the DAP door's to bound."""

    def __init__(self, most: int = MAX_CONNECTIONS) -> None:
        self.most = most
        self._silent: dict[FirstBytesSwitch, None] = {}  # oldest first
        self.evicted = 0

    @property
    def open(self) -> int:
        return len(self._silent)

    def admit(self, switch: FirstBytesSwitch) -> None:
        while len(self._silent) >= self.most:
            oldest = next(iter(self._silent))
            self.leave(oldest)
            oldest.close()
            self.evicted += 1
        self._silent[switch] = None

    def leave(self, switch: FirstBytesSwitch) -> None:
        self._silent.pop(switch, None)


class FirstBytesSwitch(asyncio.Protocol):
    """One accepted connection until its first bytes say which server takes it."""

    def __init__(
        self,
        http_protocol: Callable[[], asyncio.Protocol],
        dap_handler: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
        gate: Gate | None = None,
    ) -> None:
        self._http_protocol = http_protocol
        self._dap_handler = dap_handler
        self._gate = gate
        self._transport: asyncio.Transport | None = None
        self._head = b""
        self._too_slow: asyncio.TimerHandle | None = None

    def __str__(self) -> str:
        peer = self._transport.get_extra_info("peername") if self._transport else None
        return f"FirstBytesSwitch[{peer}]"

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        self._too_slow = asyncio.get_running_loop().call_later(FIRST_BYTES_TIMEOUT_S, self.close)
        if self._gate is not None:
            self._gate.admit(self)

    def close(self) -> None:
        """Close a connection that has not spoken (too slow, or the oldest of too many)."""
        if self._transport is not None:
            self._transport.close()

    def data_received(self, data: bytes) -> None:
        if self._transport is None:
            return
        self._head += data
        if len(self._head) < len(DAP_HEADER) and DAP_HEADER.startswith(self._head):
            return  # could still be either: wait for more
        is_dap = self._head.startswith(DAP_HEADER)
        if is_dap:
            reader = asyncio.StreamReader(limit=STREAM_LIMIT)
            protocol: asyncio.Protocol = asyncio.StreamReaderProtocol(reader, self._dap_handler)
        else:
            protocol = self._http_protocol()
        transport, head = self._transport, self._head
        assert transport is not None
        self._transport, self._head = None, b""
        if self._too_slow is not None:
            self._too_slow.cancel()
        if self._gate is not None:
            self._gate.leave(self)
        transport.set_protocol(protocol)
        protocol.connection_made(transport)
        protocol.data_received(head)
        log.debug("a connection on the HTTP port speaks %s", "DAP" if is_dap else "HTTP")

    def eof_received(self) -> bool | None:
        return None  # closed before it said anything: nothing to hand over

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None
        if self._too_slow is not None:
            self._too_slow.cancel()
        if self._gate is not None:
            self._gate.leave(self)


async def serve_one_port(
    http_protocol: Callable[[], asyncio.Protocol],
    dap_handler: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
    host: str,
    port: int,
    gate: Gate | None = None,
) -> asyncio.Server:
    """Listen on host:port for both HTTP (`http_protocol`, aiohttp's `runner.server`) and DAP;
    a connection silent for FIRST_BYTES_TIMEOUT_S is closed, and `gate` bounds how many are open."""
    loop = asyncio.get_running_loop()
    return await loop.create_server(
        lambda: FirstBytesSwitch(http_protocol, dap_handler, gate), host, port, reuse_address=True
    )
