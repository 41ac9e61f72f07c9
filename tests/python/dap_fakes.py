"""A fake node relay connection and scripted DAP peers for tests without Ray: bytes between a
client and a DapChannel standing in for debugpy, as the relay carries them (send, long-poll recv,
close); a peer answering by hand; two channels joined back to back."""

from __future__ import annotations

import asyncio

from raysleuth.dap.channel import DapChannel
from raysleuth.dap.framing import encode, read_message
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


class ScriptedPeer:
    """The far end, by hand: sees what the channel sent, answers whatever and whenever."""

    def __init__(self) -> None:
        self.to_channel = asyncio.StreamReader()
        self._sent = asyncio.StreamReader()
        self.closed = False

    async def send(self, data: bytes) -> None:
        self._sent.feed_data(data)

    async def close(self) -> None:
        self.closed = True

    def channel(self, **kwargs) -> DapChannel:
        return DapChannel(self.to_channel, CallTransport(self.send, self.close), **kwargs).start()

    async def next_sent(self) -> dict:
        return await asyncio.wait_for(read_message(self._sent), 5)

    def say(self, **msg) -> None:
        self.to_channel.feed_data(encode(msg))

    def answer(self, request: dict, body: dict | None = None, seq: int = 100) -> None:
        self.say(
            seq=seq,
            type="response",
            request_seq=request["seq"],
            command=request["command"],
            success=True,
            body=body or {},
        )


def back_to_back(client_kw: dict | None = None, server_kw: dict | None = None):
    """Two started channels joined in memory; closing one ends the other's input."""
    a_in, b_in = asyncio.StreamReader(), asyncio.StreamReader()

    def sender(reader):
        async def send(data: bytes) -> None:
            reader.feed_data(data)

        return send

    def closer(reader):
        async def close() -> None:
            reader.feed_eof()

        return close

    a = DapChannel(a_in, CallTransport(sender(b_in), closer(b_in)), name="client", **(client_kw or {}))
    b = DapChannel(b_in, CallTransport(sender(a_in), closer(a_in)), name="server", **(server_kw or {}))
    return a.start(), b.start()
