"""A fake node relay connection for DAP tests without Ray: bytes between a client and a
DapChannel standing in for debugpy, as the relay carries them (send, long-poll recv, close)."""

from __future__ import annotations

import asyncio

from raysleuth.dap.transport import CallTransport


class RelayPipe:
    def __init__(self) -> None:
        self.to_debugpy = asyncio.StreamReader()
        """What debugpy reads: the client's bytes."""
        self.buffer = bytearray()
        self.ready = asyncio.Event()
        self.ended = False
        """debugpy's side closed."""

    def debugpy_transport(self) -> CallTransport:
        """The transport for the channel that plays debugpy."""
        return CallTransport(self._from_debugpy, self._debugpy_closes)

    async def _from_debugpy(self, data: bytes) -> None:
        self.buffer += data
        self.ready.set()

    async def _debugpy_closes(self) -> None:
        self.ended = True
        self.ready.set()

    def send(self, data: bytes) -> bool:
        """The relay's `send`: False once debugpy's side is gone."""
        if self.ended:
            return False
        self.to_debugpy.feed_data(data)
        return True

    async def recv(self, wait: float) -> tuple[bytes, bool]:
        """The relay's `recv`: what debugpy sent (waiting up to `wait` s) and whether it ended."""
        if not self.buffer and not self.ended:
            try:
                await asyncio.wait_for(self.ready.wait(), wait)
            except asyncio.TimeoutError:
                pass  # a long poll that found nothing: an empty answer
        self.ready.clear()
        data, self.buffer = bytes(self.buffer), bytearray()
        return data, self.ended and not data

    def close(self) -> None:
        self.to_debugpy.feed_eof()
