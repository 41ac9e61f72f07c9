"""DapChannel without sockets or Ray: a scripted peer on one side, or two channels back to back
(in memory, or through a fake node relay that carries bytes like the real one's Ray calls)."""

from __future__ import annotations

import asyncio

import pytest
from dap_fakes import RelayPipe

from raysleuth.dap.channel import ENDED, ChannelClosed, DapChannel, DapTimeout
from raysleuth.dap.client import DapClient, DapError
from raysleuth.dap.framing import encode, read_message
from raysleuth.dap.transport import CallTransport


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


# --- requests and responses -------------------------------------------------------------------


async def test_a_response_resolves_the_request_with_the_same_seq():
    peer = ScriptedPeer()
    ch = peer.channel()
    call = asyncio.create_task(ch.request("threads", {}))
    sent = await peer.next_sent()
    assert (sent["type"], sent["command"], sent["arguments"], sent["seq"]) == ("request", "threads", {}, 1)
    peer.answer(sent, {"threads": [{"id": 7}]})
    resp = await asyncio.wait_for(call, 5)
    assert resp["body"] == {"threads": [{"id": 7}]} and resp["request_seq"] == 1


async def test_responses_out_of_order_reach_their_own_requests():
    peer = ScriptedPeer()
    ch = peer.channel()
    first = asyncio.create_task(ch.request("evaluate", {"expression": "slow"}))
    second = asyncio.create_task(ch.request("evaluate", {"expression": "fast"}))
    r1, r2 = await peer.next_sent(), await peer.next_sent()
    assert (r1["seq"], r2["seq"]) == (1, 2)
    peer.answer(r2, {"result": "fast"})
    assert (await asyncio.wait_for(second, 5))["body"]["result"] == "fast"
    assert not first.done()
    peer.answer(r1, {"result": "slow"})
    assert (await asyncio.wait_for(first, 5))["body"]["result"] == "slow"


async def test_a_failed_response_is_returned_and_the_client_raises_dap_error():
    peer = ScriptedPeer()
    ch = peer.channel()
    call = asyncio.create_task(ch.request("attach", {}))
    req = await peer.next_sent()
    peer.say(seq=9, type="response", request_seq=req["seq"], command="attach", success=False, message="no")
    assert (await call)["message"] == "no"


async def test_the_client_raises_dap_error_for_a_failed_response_unless_told_not_to():
    peer = ScriptedPeer()
    client = DapClient(peer.to_channel, CallTransport(peer.send))
    call = asyncio.create_task(client.request("attach", {}))
    req = await peer.next_sent()
    peer.say(seq=10, type="response", request_seq=req["seq"], command="attach", success=False, message="no")
    with pytest.raises(DapError, match="no"):
        await call
    call = asyncio.create_task(client.request("attach", {}, check=False))
    req = await peer.next_sent()
    peer.say(seq=11, type="response", request_seq=req["seq"], command="attach", success=False, message="no")
    assert (await call)["success"] is False


async def test_outgoing_seq_is_shared_by_requests_responses_and_events():
    a, b = back_to_back()
    await b.event("output", {"output": "x"})
    await b.respond({"seq": 5, "command": "threads"}, {"threads": []})
    ev = await a.wait_event("output", timeout=5)
    assert ev["seq"] == 1
    await b.send({"type": "event", "event": "e2"})
    assert (await a.wait_event("e2", timeout=5))["seq"] == 3


# --- timeouts ---------------------------------------------------------------------------------


async def test_a_request_times_out_with_a_clear_error_and_the_channel_stays_usable():
    peer = ScriptedPeer()
    ch = peer.channel(name="Link[rank=3]")
    with pytest.raises(DapTimeout, match=r"Link\[rank=3\]: no answer to 'evaluate' \(seq 1\) in 0.05 s"):
        await ch.request("evaluate", {"expression": "x"}, timeout=0.05)
    late = await peer.next_sent()
    peer.answer(late)  # too late: dropped, not an error
    call = asyncio.create_task(ch.request("threads"))
    req = await peer.next_sent()
    assert "arguments" not in req
    peer.answer(req, {"threads": []})
    assert (await asyncio.wait_for(call, 5))["body"] == {"threads": []}
    assert not ch.closed.is_set()


async def test_a_timeout_is_an_asyncio_timeout_error():
    peer = ScriptedPeer()
    ch = peer.channel()
    with pytest.raises(asyncio.TimeoutError):
        await ch.request("threads", timeout=0.01)
    with pytest.raises(asyncio.TimeoutError, match="no 'stopped' event in 0.01 s"):
        await ch.wait_event("stopped", timeout=0.01)


# --- events -----------------------------------------------------------------------------------


async def test_events_queue_up_and_wait_event_takes_the_first_that_matches():
    peer = ScriptedPeer()
    ch = peer.channel()
    peer.say(seq=1, type="event", event="output", body={"output": "a"})
    peer.say(seq=2, type="event", event="stopped", body={"threadId": 1})
    peer.say(seq=3, type="event", event="stopped", body={"threadId": 2})
    ev = await ch.wait_event("stopped", lambda b: b["threadId"] == 2, timeout=5)
    assert ev["seq"] == 3
    assert (await ch.wait_event("stopped", timeout=5, consume=False))["seq"] == 2
    assert [e["seq"] for e in ch.events] == [1, 2]
    assert (await ch.next_event(timeout=5))["event"] == "output"


async def test_wait_event_wakes_when_the_event_arrives_later():
    peer = ScriptedPeer()
    ch = peer.channel()
    waiting = asyncio.create_task(ch.wait_event("initialized", timeout=5))
    await asyncio.sleep(0)
    assert not waiting.done()
    peer.say(seq=1, type="event", event="initialized")
    assert (await waiting)["event"] == "initialized"


async def test_an_event_callback_sees_events_in_order_and_nothing_queues():
    seen = []
    peer = ScriptedPeer()
    ch = peer.channel(on_event=lambda ev: seen.append(ev["event"]))
    for i, name in enumerate(["stopped", "continued", "output"]):
        peer.say(seq=i + 1, type="event", event=name)
    call = asyncio.create_task(ch.request("threads"))
    peer.answer(await peer.next_sent())
    await call  # the response was read after the three events, so they were all delivered
    assert seen == ["stopped", "continued", "output"] and ch.events == []
    with pytest.raises(RuntimeError, match="callback"):
        await ch.wait_event("stopped")


async def test_a_failing_event_callback_does_not_end_the_channel():
    def boom(ev):
        raise ValueError("bug in a callback")

    peer = ScriptedPeer()
    ch = peer.channel(on_event=boom, queue_events=True)
    peer.say(seq=1, type="event", event="stopped")
    assert (await ch.wait_event("stopped", timeout=5))["seq"] == 1
    assert not ch.closed.is_set()


# --- closing ----------------------------------------------------------------------------------


async def test_the_peer_closing_fails_pending_requests_and_waiters_with_a_clear_error():
    reasons = []
    peer = ScriptedPeer()
    ch = peer.channel(name="DapClient[x]", on_closed=reasons.append)
    call = asyncio.create_task(ch.request("continue", {"threadId": 1}))
    waiter = asyncio.create_task(ch.wait_event("stopped", timeout=5))
    await peer.next_sent()
    peer.to_channel.feed_eof()
    with pytest.raises(ChannelClosed, match=r"DapClient\[x\] closed before answering 'continue'") as exc:
        await asyncio.wait_for(call, 5)
    assert exc.value.reason == ENDED and isinstance(exc.value, ConnectionError)
    with pytest.raises(ChannelClosed, match="closed before a 'stopped' event"):
        await waiter
    assert reasons == [ENDED] and ch.close_reason == ENDED
    with pytest.raises(ChannelClosed, match="is closed: the connection ended"):
        await ch.request("threads")


async def test_close_fails_pending_requests_with_its_reason_and_closes_the_transport():
    reasons = []

    async def on_closed(reason):
        reasons.append(reason)

    peer = ScriptedPeer()
    ch = peer.channel(on_closed=on_closed)
    call = asyncio.create_task(ch.request("threads"))
    await peer.next_sent()
    await ch.close("idle: no session used it")
    with pytest.raises(ChannelClosed, match="idle: no session used it"):
        await call
    await ch.close("again")  # a second close changes nothing
    assert peer.closed and reasons == ["idle: no session used it"]
    assert not await ch.event("output")  # the peer is gone: False, not an exception


@pytest.mark.parametrize(
    "garbage",
    [b"Content-Length: x\r\n\r\n{}", b"Content-Length: 2\r\n\r\n[]", b"Content-Length: 3\r\n\r\n{{{"],
)
async def test_bad_framing_closes_the_channel_and_fails_pending_requests(garbage):
    peer = ScriptedPeer()
    ch = peer.channel()
    call = asyncio.create_task(ch.request("threads"))
    await peer.next_sent()
    peer.to_channel.feed_data(garbage)
    with pytest.raises(ChannelClosed, match="bad bytes from the peer"):
        await asyncio.wait_for(call, 5)
    assert ch.close_reason.startswith("bad bytes from the peer")


async def test_a_transport_that_fails_to_send_raises_channel_closed_and_forgets_the_request():
    async def refuse(data: bytes) -> bool:
        return False  # what the relay answers once its connection is gone

    ch = DapChannel(asyncio.StreamReader(), refuse, name="L").start()
    with pytest.raises(ChannelClosed, match="L: cannot send: the far end of the connection is gone"):
        await ch.request("threads")
    assert not ch._pending and not ch.closed.is_set()


# --- a fake node relay --------------------------------------------------------------------------


class FakeRelay:
    """The node relay's remote methods (`send`, `recv`, `close`), without Ray: one connection
    whose far end is a DapChannel playing debugpy."""

    def __init__(self, **debugpy_kw) -> None:
        self.pipe = RelayPipe()
        self.sends = 0
        self.recv_error: Exception | None = None
        self.debugpy = DapChannel(
            self.pipe.to_debugpy, self.pipe.debugpy_transport(), name="debugpy", **debugpy_kw
        ).start()

    @property
    def ended(self) -> bool:
        return self.pipe.ended

    async def send(self, conn: int, data: bytes) -> bool:
        self.sends += 1
        return self.pipe.send(data)

    async def recv(self, conn: int, wait: float) -> tuple[bytes, bool]:
        if self.recv_error is not None:
            raise self.recv_error
        return await self.pipe.recv(wait)

    async def close(self, conn: int) -> None:
        self.pipe.close()


async def answer_everything(channel_ref: list, request: dict) -> None:
    await channel_ref[0].respond(request, {"echo": request.get("arguments")})


async def test_over_a_fake_relay_requests_events_and_the_end_pass_like_on_a_socket():
    debugpy: list = []
    relay = FakeRelay(on_request=lambda req: answer_everything(debugpy, req))
    debugpy.append(relay.debugpy)
    closed = []
    ch = DapChannel.over_polls(
        send=lambda data: relay.send(1, data),
        poll=lambda: relay.recv(1, 0.05),
        close=lambda: relay.close(1),
        name="link",
        on_closed=closed.append,
    ).start()
    answers = await asyncio.gather(*(ch.request("evaluate", {"n": i}, timeout=5) for i in range(20)))
    assert [a["body"]["echo"]["n"] for a in answers] == list(range(20))
    await relay.debugpy.event("stopped", {"threadId": 4})
    assert (await ch.wait_event("stopped", timeout=5))["body"] == {"threadId": 4}
    await relay.debugpy.close("the worker exited")
    await asyncio.wait_for(ch.closed.wait(), 5)
    assert closed == [ENDED]


async def test_a_relay_that_dies_ends_the_channel():
    relay = FakeRelay()
    ch = DapChannel.over_polls(send=lambda d: relay.send(1, d), poll=lambda: relay.recv(1, 0.05)).start()
    call = asyncio.create_task(ch.request("threads", timeout=5))
    relay.recv_error = RuntimeError("the relay's node died")
    relay.pipe.ready.set()
    with pytest.raises(ChannelClosed, match=ENDED):
        await call


# --- the server side --------------------------------------------------------------------------


async def test_a_request_handler_answers_requests_in_order():
    order = []
    server: list = []

    async def handle(request):
        order.append(request["command"])
        if request["command"] == "initialize":
            await asyncio.sleep(0.02)  # the next request waits for this one
            await server[0].respond(request, {"supportsConfigurationDoneRequest": True})
        else:
            await server[0].respond(request)
            await server[0].event("initialized")

    client, srv = back_to_back(server_kw={"on_request": handle})
    server.append(srv)
    init = asyncio.create_task(client.request("initialize", {}))
    attach = asyncio.create_task(client.request("attach", {}))
    resp = await asyncio.wait_for(init, 5)
    assert resp["success"] and resp["body"] == {"supportsConfigurationDoneRequest": True}
    assert (await asyncio.wait_for(attach, 5))["success"] and "body" not in (await attach)
    assert order == ["initialize", "attach"]
    await client.wait_event("initialized", timeout=5)


async def test_an_error_response_says_success_false_and_carries_the_message():
    server: list = []

    async def handle(request):
        await server[0].respond(request, error="Ray Sleuth: attach refused, the token is wrong.")

    client, srv = back_to_back(server_kw={"on_request": handle})
    server.append(srv)
    resp = await client.request("attach", {"token": "nope"}, timeout=5)
    assert resp["success"] is False and resp["message"] == "Ray Sleuth: attach refused, the token is wrong."
    assert resp["body"]["error"]["format"] == resp["message"] and resp["body"]["error"]["showUser"]
    # With a body of its own (debugpy's failure forwarded), the body is kept.
    await srv.respond({"seq": 99, "command": "evaluate"}, {"x": 1}, error="NameError")
    assert not srv.closed.is_set()


async def test_a_handler_that_raises_answers_with_an_error_and_the_session_goes_on():
    async def handle(request):
        if request["command"] == "bad":
            raise KeyError("frameId")
        await srv.respond(request, {"ok": True})

    client, srv = back_to_back(server_kw={"on_request": handle})
    resp = await client.request("bad", timeout=5)
    assert resp["success"] is False and "KeyError" in resp["message"]
    assert (await client.request("good", timeout=5))["body"] == {"ok": True}


async def test_a_handler_returning_false_ends_the_channel_after_its_answer():
    async def handle(request):
        await srv.respond(request)
        return request["command"] != "disconnect"

    client, srv = back_to_back(server_kw={"on_request": handle})
    assert (await client.request("disconnect", timeout=5))["success"]
    assert await asyncio.wait_for(srv.run(), 5) == "ended after 'disconnect'"
    await asyncio.wait_for(client.closed.wait(), 5)


async def test_a_channel_without_a_handler_refuses_requests():
    client, srv = back_to_back()
    resp = await client.request("runInTerminal", {}, timeout=5)
    assert resp["success"] is False and "server does not take requests" in resp["message"]


async def test_a_handler_may_send_requests_of_its_own_while_it_runs():
    # Incoming requests are handled in their own task, so the reader still reads the answer.
    async def handle(request):
        inner = await srv.request("runInTerminal", {"args": ["x"]}, timeout=5)
        await srv.respond(request, {"inner": inner["body"]})

    async def client_handles(request):
        await client.respond(request, {"processId": 42})

    client, srv = back_to_back(client_kw={"on_request": client_handles}, server_kw={"on_request": handle})
    resp = await client.request("launch", timeout=5)
    assert resp["body"] == {"inner": {"processId": 42}}


async def test_a_handler_that_raises_after_answering_is_not_answered_twice():
    async def handle(request):
        await srv.respond(request, {"first": True})
        raise RuntimeError("after the answer")

    client, srv = back_to_back(server_kw={"on_request": handle}, client_kw={"queue_events": True})
    assert (await client.request("x", timeout=5))["body"] == {"first": True}
    await srv.event("marker")  # sent after the handler finished: nothing came between
    await client.wait_event("marker", timeout=5)
    assert srv._seq == 2
