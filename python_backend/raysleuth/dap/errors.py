"""How a DAP channel tells its callers that an answer will not come."""

from __future__ import annotations

import asyncio

ENDED = "the connection ended"
"""`close_reason` when the peer closed its end (a clean end of stream)."""


class ChannelClosed(ConnectionError):
    """The channel closed (or the peer went away) before a request was answered or an event came.

    `reason` says why: `ENDED`, a framing error, or the reason given to `close()`.
    """

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason or message


class DapTimeout(asyncio.TimeoutError):
    """No answer (or no matching event) in time; the channel itself stays open."""
