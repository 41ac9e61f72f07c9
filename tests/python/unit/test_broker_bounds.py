"""The broker's doors hold against clients that hog them (#23): DAP messages bounded before an
attach, a body that never comes, a connection that says nothing or never attaches, too many
connections, a stream client that falls behind; and (#37) every open connection counted, a
half-sent request head closed, requests before an attach and unread output bounded, the session's
own method names answered "unknown command". Real sockets on loopback, the broker's own framing,
front door, switch and hub; time bounds shrunk for the test through the settings (the same
floods against a real broker process: tests/python/integration/test_broker_floods.py)."""

from __future__ import annotations

import asyncio
import json
import logging
import socket

import pytest
from wire import peer_dropped

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


# --- #37: every connection counted, a header timeout, bounds before attach, a dispatch table ---


@pytest.fixture
async def both_port(monkeypatch):
    """The switch with a real aiohttp app (GET /v1/ping) and the front door, a gate of 3 that
    vouches for the token `T`*40, the header timeout shrunk to 0.5 s."""
    from aiohttp import web

    monkeypatch.setattr(oneport, "HTTP_HEADER_TIMEOUT_S", 0.5)
    app = web.Application()
    app.router.add_get("/v1/ping", lambda _: web.json_response({"pong": True}))
    runner = web.AppRunner(app, keepalive_timeout=30)
    await runner.setup()
    token = "T" * 40
    door = DapFrontDoor(token, "/state/token", Table(), None, None, None)
    gate = Gate(most=3, vouch=lambda head: oneport.bearer_in(head, token))
    door.gate = gate
    server = await serve_one_port(runner.server, door.handle, "127.0.0.1", 0, gate)
    yield server.sockets[0].getsockname()[1], gate, token
    server.close()
    await runner.cleanup()


async def get_ping(port: int, token: str | None = None):
    """A keep-alive connection that made one request: (reader, writer), still open."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    writer.write(f"GET /v1/ping HTTP/1.1\r\nHost: x\r\n{auth}\r\n".encode())
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    assert head.startswith(b"HTTP/1.1 200")
    length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
    await reader.readexactly(length)
    return reader, writer


async def test_every_open_connection_counts_and_the_oldest_unproven_makes_room(both_port):
    port, gate, token = both_port
    proven = await get_ping(port, token)  # the oldest, but it sent the token
    plain = await get_ping(port)
    half_r, half_w = await asyncio.open_connection("127.0.0.1", port)
    half_w.write(b"GET /v1/ping HTTP/1.1\r\nHost: x\r\n")  # its head never ends
    while gate.open < 3:
        await asyncio.sleep(0.01)
    newcomer = await get_ping(port)  # full: the half-sent one goes first, then the plain one
    assert await asyncio.wait_for(half_r.read(), 5) == b"" and gate.open == 3
    last = await get_ping(port)
    assert await asyncio.wait_for(plain[0].read(), 5) == b"" and gate.evicted == 2
    for r, w in (proven, newcomer, last):
        assert not r.at_eof()
        w.close()


async def test_a_gate_full_of_proven_connections_turns_the_newcomer_away(both_port):
    port, gate, token = both_port
    held = [await get_ping(port, token) for _ in range(3)]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    assert await asyncio.wait_for(reader.read(), 5) == b"" and gate.refused == 1
    for r, w in held:
        assert not r.at_eof()
        w.close()
    writer.close()


async def test_a_half_sent_request_head_is_closed_after_the_header_timeout(both_port):
    port, _, _ = both_port
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /v1/ping HTTP/1.1\r\nHost: x\r\nX-Slow: 1")  # then nothing
    got = await asyncio.wait_for(reader.read(), 5)
    assert got.startswith(b"HTTP/1.1 408") and b'"hint"' in got
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /v1/ping HTTP/1.1\r\n" + b"X-Long: y\r\n" * 4000)  # over 32 KiB, no end
    assert (await asyncio.wait_for(reader.read(), 5)).startswith(b"HTTP/1.1 431")


async def test_names_of_the_session_are_unknown_commands_without_a_traceback(door_port, caplog):
    port, _ = door_port
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    names = ["on", "__init__", "_handle", "initialize_request", "on_request", "respond", "run", "threads"]
    for seq, name in enumerate(names, 1):
        writer.write(frame({"seq": seq, "type": "request", "command": name}))
    for name in names:
        answer = await asyncio.wait_for(read_message(reader), 5)
        assert answer["command"] == name and answer["success"] is False
        expected = "needs an attached worker" if name == "threads" else "unknown command"
        assert expected in answer["message"], answer
    writer.close()
    assert "Traceback" not in caplog.text and not [r for r in caplog.records if r.exc_info]


async def test_requests_before_attach_past_the_bound_close_the_connection(door_port, monkeypatch):
    monkeypatch.setattr(dap_front, "DAP_REQUESTS_BEFORE_ATTACH", 5)
    port, _ = door_port
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"".join(frame({"seq": i, "type": "request", "command": "threads"}) for i in range(1, 6)))
    for seq in range(1, 6):  # within the bound: each answered
        answer = await asyncio.wait_for(read_message(reader), 5)
        assert answer["request_seq"] == seq and answer["success"] is False
    writer.write(b"".join(frame({"seq": i, "type": "request", "command": "threads"}) for i in range(6, 21)))
    try:  # one more: dropped (a reset), nothing more answered
        assert await asyncio.wait_for(reader.read(), 5) == b""
    except ConnectionResetError:
        pass
    writer.close()


async def test_a_client_that_floods_and_never_reads_is_reset_at_once(door_port, caplog):
    """The answers to its first 64 requests fill its receive window: a plain close would queue
    the broker's FIN behind them, and a client that never reads would never see the end of its
    connection (#37: an attacker's socket stayed open, the broker's half in FIN-WAIT-1). A reset
    ends it on both sides at once."""
    caplog.set_level(logging.INFO, "raysleuth")
    port, _ = door_port
    flood = b"".join(frame({"seq": i, "type": "request", "command": "threads"}) for i in range(1, 101))
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # and it never reads
    sock.connect(("127.0.0.1", port))
    try:
        sock.sendall(flood)
        deadline = asyncio.get_running_loop().time() + 5
        while not peer_dropped(sock):
            assert asyncio.get_running_loop().time() < deadline, "the client never saw the connection end"
            await asyncio.sleep(0.02)
    finally:
        sock.close()
    while "more than 64 requests before an attach" not in caplog.text:  # the session's last line
        assert asyncio.get_running_loop().time() < deadline + 5, caplog.text
        await asyncio.sleep(0.02)


async def test_output_a_client_does_not_read_is_bounded_then_the_connection_is_dropped():
    from raysleuth.dap.channel import DapChannel

    ended: asyncio.Future = asyncio.get_running_loop().create_future()

    async def serve(reader, writer):
        channel = DapChannel(reader, writer, name="bounded", queue_events=False).start()
        channel.bound(None, unsent=256 * 1024)
        # Many senders at once (the worker's events, each in a task of its own): each writes,
        # then waits for the peer to take the bytes; one waiting sender alone would hold 64 KiB.
        sent = await asyncio.gather(*(channel.event("output", {"output": "x" * 10_000}) for _ in range(1000)))
        ended.set_result((sum(sent), channel.close_reason, writer.transport.get_write_buffer_size()))

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # and it never reads
    sock.connect(server.sockets[0].getsockname())
    try:
        sent, reason, _ = await asyncio.wait_for(ended, 10)
        assert reason and "has not read" in reason and sent < 500  # 256 KiB + the kernel's, not 10 MB
    finally:
        sock.close()
        server.close()
