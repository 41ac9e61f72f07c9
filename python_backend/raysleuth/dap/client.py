"""A small asyncio DAP client: the terminal debugger (`raysleuth attach`), the tests and the
benchmarks use it. It is a `DapChannel` that starts at once, queues events, and whose `request`
raises `DapError` for a failed response unless told not to.
"""

from __future__ import annotations

import asyncio

from raysleuth.dap.channel import DEFAULT_REQUEST_TIMEOUT_S, ChannelClosed, DapChannel, DapTimeout
from raysleuth.shared.peer import check_broker_peer

__all__ = ["ChannelClosed", "DapClient", "DapError", "DapTimeout", "open_session"]


class DapError(Exception):
    """A request failed: the adapter's message."""


class DapClient(DapChannel):
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, **kwargs) -> None:
        kwargs.setdefault("name", "DapClient")
        super().__init__(reader, writer, **kwargs)
        self.writer = writer
        self.start()

    @classmethod
    async def connect(cls, host: str | None, port: int | None, path: str | None = None, **kw) -> DapClient:
        """A started client over a new TCP connection, or an AF_UNIX one to `path`."""
        opening = asyncio.open_unix_connection(path) if path else asyncio.open_connection(host, port)
        reader, writer = await opening
        return cls(reader, writer, **kw)

    async def request(
        self,
        command: str,
        arguments: dict | None = None,
        timeout: float | None = DEFAULT_REQUEST_TIMEOUT_S,
        check: bool = True,
    ) -> dict:
        """The response; with `check`, a failed one raises DapError with the adapter's message."""
        resp = await super().request(command, arguments, timeout=timeout)
        if check and not resp.get("success"):
            raise DapError(resp.get("message") or f"{command} failed")
        return resp


async def open_session(
    host: str,
    port: int,
    attach: dict,
    breakpoints: dict[str, list] | None = None,
    exception_filters: list[str] | None = None,
    timeout: float = 90.0,
) -> DapClient:
    """initialize → attach → (setBreakpoints…) → configurationDone, as an editor does. An attach
    that carries a secret (`token`, `ticket`) goes only to a broker process of ours: the peer of
    the connection is checked before its first byte (`shared/peer.py`)."""
    c = await DapClient.connect(host, port)
    try:
        if "token" in attach or "ticket" in attach:
            check_broker_peer(c.writer.get_extra_info("socket"), f"the DAP port {host}:{port}")
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
    except BaseException:
        await c.close("the session did not open")  # the caller never gets it: do not leak it
        raise
    return c
