"""The broker's doors hold against clients that hog them (#23): DAP messages bounded before an
attach, a body that never comes, a connection that says nothing or never attaches, too many
connections, a stream client that falls behind. Real sockets on loopback, the broker's own
framing, front door, switch and hub; time bounds shrunk for the test through the settings."""

from __future__ import annotations

import asyncio
import json
import socket

import pytest

from raysleuth.broker import oneport
from raysleuth.broker.debug import dap_front
from raysleuth.broker.debug.dap_front import DapFrontDoor
from raysleuth.broker.events import DROPPED, QUEUE_SIZE, EventHub
from raysleuth.broker.oneport import Gate, serve_one_port
from raysleuth.dap.framing import FramingError, bound_reader, read_message


def frame(msg: dict) -> bytes:
    body = json.dumps(msg).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


async def test_a_message_over_the_readers_bound_or_slower_than_its_timeout_is_refused():
    r = asyncio.StreamReader()
    bound_reader(r, 100)
    r.feed_data(b"Content-Length: 101\r\n\r\n")
    with pytest.raises(FramingError, match="at most 100 bytes"):
        await read_message(r)
    r = asyncio.StreamReader()
    bound_reader(r, 1 << 20, 0.2)
    r.feed_data(b"Content-Length: 50\r\n\r\n{")  # the rest never comes
    with pytest.raises(FramingError, match="did not come within 0.2 s"):
        await read_message(r)


def test_the_hub_drops_a_client_that_fell_behind_with_a_last_event():
    hub = EventHub()
    q = hub.subscribe()
    for i in range(QUEUE_SIZE + 1):
        hub.publish("log", {"i": i})
    assert [q.get_nowait(), q.get_nowait()] == [DROPPED, None] and q.empty()
    assert hub.watchers == 0 and b"fell 256 events behind" in DROPPED


class Table:
    def workers(self):
        return []


@pytest.fixture
async def door_port(monkeypatch):
    monkeypatch.setattr(dap_front, "ATTACH_WITHIN_S", 0.5)
    monkeypatch.setattr(oneport, "FIRST_BYTES_TIMEOUT_S", 0.5)
    door = DapFrontDoor("t" * 40, "/state/token", Table(), None, None, None)
    gate = Gate(most=3)

    def http():
        raise AssertionError("no HTTP in this test")

    server = await serve_one_port(http, door.handle, "127.0.0.1", 0, gate)
    yield server.sockets[0].getsockname()[1], gate
    server.close()


async def closed_by_broker(port: int, send: bytes, timeout: float = 10) -> bytes:
    """Connect, send, and read until the broker closes (fails if it never does)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(send)
    await writer.drain()
    got = await asyncio.wait_for(reader.read(), timeout)  # until EOF
    writer.close()
    return got


async def test_a_silent_connection_and_one_that_never_attaches_are_closed(door_port):
    port, _ = door_port
    assert await closed_by_broker(port, b"") == b""  # said nothing
    answers = await closed_by_broker(port, frame({"seq": 1, "type": "request", "command": "initialize"}))
    assert b'"success":true' in answers and b'"command":"initialize"' in answers  # then closed


async def test_a_large_message_before_attach_is_refused_unread(door_port):
    port, _ = door_port
    big = b"Content-Length: %d\r\n\r\n" % (2 << 20)
    assert await closed_by_broker(port, big + b"{" * 1000) == b""


async def test_a_crowd_of_silent_connections_cannot_lock_a_client_out(door_port):
    port, gate = door_port
    held = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]
    try:
        while gate.open < 3:  # the server has taken them: the gate is full
            await asyncio.sleep(0.01)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)  # a client that speaks
        writer.write(frame({"seq": 1, "type": "request", "command": "initialize"}))
        answer = await asyncio.wait_for(read_message(reader), 5)
        assert answer["command"] == "initialize" and answer["success"] and gate.evicted == 1
        held[0].settimeout(5)
        assert held[0].recv(1) == b""  # the oldest silent one made room
        writer.close()
    finally:
        for s in held:
            s.close()


def test_the_registry_hears_of_watchers_only_when_the_first_comes_or_the_last_goes():
    """Each call is a Ray actor call on the broker's event loop: 200 stream clients coming and
    going (bench/broker_limits) made one per connection and stalled every route."""
    hub = EventHub()
    told = []
    hub.on_watched = told.append
    queues = [hub.subscribe() for _ in range(200)]
    for q in queues[:-1]:
        hub.unsubscribe(q)
    assert told == [True]
    hub.unsubscribe(queues[-1])
    hub.subscribe()
    assert told == [True, False, True]
