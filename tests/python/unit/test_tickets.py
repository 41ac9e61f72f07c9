"""Attach tickets (#37): the store's bounds with an injected clock, `POST /v1/tickets` through the
HTTP API, and DAP `attach {ticket}` through the real front door on a loopback socket."""

from __future__ import annotations

import asyncio
import re

import pytest
from aiohttp.test_utils import TestClient, TestServer
from broker_fakes import FakeTable, services, worker

from raysleuth.broker.debug.dap_front import DapFrontDoor
from raysleuth.broker.http_api import make_app
from raysleuth.broker.tickets import GONE, MAX_TICKETS, TicketStore, admit_attach, ttl_setting
from raysleuth.dap.client import DapClient

TOKEN = "t" * 40


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_ticket_is_good_until_its_ttl_and_not_after():
    clock = Clock()
    store = TicketStore(ttl_s=60, clock=clock)
    early, late = store.issue({})["ticket"], store.issue({})["ticket"]
    clock.now += 59.9
    assert store.redeem(early) == {}
    clock.now += 0.1  # 60 s after the issue
    assert store.redeem(late) is None and len(store) == 0


def test_a_ticket_is_spent_by_its_first_use_and_unknown_ones_are_refused():
    store = TicketStore(ttl_s=60, clock=Clock())
    t = store.issue({"rank": 3})["ticket"]
    assert store.redeem(t) == {"rank": 3}
    assert store.redeem(t) is None
    for bad in ("0" * 64, "", None, 42, ["x"], "x" * 10_000):
        assert store.redeem(bad) is None


def test_at_most_256_are_outstanding_and_the_oldest_goes_first():
    store = TicketStore(ttl_s=60, clock=Clock())
    issued = [store.issue({})["ticket"] for _ in range(MAX_TICKETS + 1)]
    assert len(store) == MAX_TICKETS
    assert store.redeem(issued[0]) is None  # dropped for the 257th
    assert store.redeem(issued[1]) == {} and store.redeem(issued[-1]) == {}


def test_the_answer_and_the_ttl_setting(monkeypatch):
    answer = TicketStore(ttl_s=60).issue({})
    assert re.fullmatch(r"[0-9a-f]{64}", answer["ticket"])
    assert answer["expires_in"] == 60 and answer["single_use"] is True
    monkeypatch.setenv("RAYSLEUTH_TICKET_TTL_S", "5")
    assert ttl_setting() == 5 and TicketStore().issue({})["expires_in"] == 5
    for bad in ("0", "-3", "soon", "inf", "nan"):
        monkeypatch.setenv("RAYSLEUTH_TICKET_TTL_S", bad)
        assert ttl_setting() == 60, bad


def test_a_bound_ticket_attaches_only_its_target_and_fills_it_in():
    store = TicketStore(ttl_s=60, clock=Clock())
    t = store.issue({"rank": 1, "job": "01000000"})["ticket"]
    args = {"ticket": t, "rank": 2}
    refused = admit_attach(args, TOKEN, store)
    assert refused and "this ticket is for rank 1, job 01000000, not rank 2" in refused
    assert admit_attach({"ticket": t, "rank": 1, "job": "01000000"}, TOKEN, store) == GONE  # spent
    t = store.issue({"worker": "abc"})["ticket"]
    args = {"ticket": t}
    assert admit_attach(args, TOKEN, store) is None and args == {"ticket": t, "worker": "abc"}
    t = store.issue({"rank": 4})["ticket"]
    assert admit_attach({"ticket": t, "rank": "4"}, TOKEN, store) is None  # as the attach reads it
    t = store.issue({})["ticket"]
    assert admit_attach({"ticket": t, "crash": "c1"}, TOKEN, store) is None  # unbound: any target


def test_the_token_still_attaches_and_nothing_else_does():
    store = TicketStore(ttl_s=60)
    assert admit_attach({"token": TOKEN, "rank": 0}, TOKEN, store) is None
    for args in ({"token": "nope"}, {}, {"token": None}, {"ticket": TOKEN}):
        assert admit_attach(args, TOKEN, store), args
    assert "must be a JSON object" in admit_attach(["ticket"], TOKEN, store)  # type: ignore[arg-type]


# --- POST /v1/tickets ---------------------------------------------------------------------------


@pytest.fixture
async def http():
    store = TicketStore(ttl_s=60)
    c = TestClient(TestServer(make_app(services(TOKEN, FakeTable(), tickets=store))))
    await c.start_server()
    c.store = store
    yield c
    await c.close()


H = {"Authorization": f"Bearer {TOKEN}"}


@pytest.mark.parametrize(
    "body", [None, {}, {"worker": "abc"}, {"rank": 0}, {"rank": 7, "job": "01000000"}, {"crash": "c1"}]
)
async def test_post_tickets_issues_a_bound_ticket(http, body):
    resp = await http.post("/v1/tickets", headers=H, **({} if body is None else {"json": body}))
    assert resp.status == 200
    answer = await resp.json()
    assert set(answer) == {"ticket", "expires_in", "single_use"} and answer["expires_in"] == 60
    assert http.store.redeem(answer["ticket"]) == (body or {})


@pytest.mark.parametrize(
    "body, says",
    [
        ({"worker": 1}, '"worker" must be an id'),
        ({"worker": ""}, '"worker" must be an id'),
        ({"worker": "w" * 200}, '"worker" must be an id'),
        ({"rank": -1}, '"rank" must be a non-negative integer'),
        ({"rank": True}, '"rank" must be a non-negative integer'),
        ({"rank": "0"}, '"rank" must be a non-negative integer'),
        ({"rank": 1, "crash": "c"}, "one target, not rank and crash"),
        ({"job": "01000000"}, '"job" goes with "rank" only'),
        ({"worker": "w", "job": "j"}, '"job" goes with "rank" only'),
        ({"token": "x"}, "Unknown field(s) for a ticket: 'token'"),
        ([1], "must be a JSON object"),
        ("not json", "not JSON"),
    ],
)
async def test_post_tickets_refuses_a_bad_body_with_400_and_a_hint(http, body, says):
    kw = {"data": body} if isinstance(body, str) else {"json": body}
    resp = await http.post("/v1/tickets", headers=H, **kw)
    answer = await resp.json()
    assert resp.status == 400 and says in answer["error"] and answer["hint"], answer
    assert len(http.store) == 0


async def test_post_tickets_needs_the_token(http):
    resp = await http.post("/v1/tickets", json={})
    assert resp.status == 401 and len(http.store) == 0


# --- DAP attach {ticket} through the front door -------------------------------------------------


@pytest.fixture
async def door():
    store = TicketStore(ttl_s=60)
    front = DapFrontDoor(TOKEN, "/state/token", FakeTable([worker("w1", rank=0)]), None, None, None, store)
    server = await asyncio.start_server(front.handle, "127.0.0.1", 0)
    yield server.sockets[0].getsockname()[1], store
    server.close()


async def attach(port: int, args: dict) -> dict:
    c = await DapClient.connect("127.0.0.1", port)
    try:
        await c.request("initialize", {"adapterID": "raysleuth"})
        return await c.request("attach", args, check=False, timeout=10)
    finally:
        await c.close()


async def test_dap_attach_takes_a_ticket_once(door):
    port, store = door
    t = store.issue({"worker": "w9"})["ticket"]
    # Past the secret check: it fails only on the target (no worker w9 in the table).
    first = await attach(port, {"ticket": t})
    assert not first["success"] and "No worker with id w9" in first["message"], first
    again = await attach(port, {"ticket": t})
    assert not again["success"] and again["message"] == GONE
    assert "the attach ticket is unknown, used or expired" in GONE and "raysleuth ticket" in GONE


async def test_dap_attach_refuses_an_unknown_or_mismatched_ticket_and_spends_it(door):
    port, store = door
    unknown = await attach(port, {"ticket": "f" * 64, "worker": "w9"})
    assert unknown["message"] == GONE
    t = store.issue({"rank": 5})["ticket"]
    other = await attach(port, {"ticket": t, "rank": 6})
    assert not other["success"] and "this ticket is for rank 5, not rank 6" in other["message"]
    assert store.redeem(t) is None and len(store) == 0


async def test_dap_attach_with_the_token_still_passes_the_secret_check(door):
    port, _ = door
    ok = await attach(port, {"token": TOKEN, "worker": "w9"})
    assert "No worker with id w9" in ok["message"]
    bad = await attach(port, {"token": "nope", "worker": "w9"})
    assert "the token is missing or wrong" in bad["message"]
