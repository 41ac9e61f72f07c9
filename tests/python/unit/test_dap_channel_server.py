"""DapChannel as a server and over a relay, without sockets or Ray: request handlers answering in
order, and a fake node relay that carries bytes like the real one's Ray calls."""

from __future__ import annotations

import asyncio

import pytest
from dap_fakes import RelayPipe, back_to_back

from raysleuth.dap.channel import ENDED, ChannelClosed, DapChannel

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
