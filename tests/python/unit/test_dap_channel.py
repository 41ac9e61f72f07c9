"""DapChannel without sockets or Ray: a scripted peer on one side, or two channels back to back
(in memory, or through a fake node relay that carries bytes like the real one's Ray calls)."""

from __future__ import annotations

import asyncio

import pytest
from dap_fakes import ScriptedPeer, back_to_back

from raysleuth.dap.channel import ENDED, ChannelClosed, DapChannel, DapTimeout
from raysleuth.dap.client import DapClient, DapError
from raysleuth.dap.transport import CallTransport

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
