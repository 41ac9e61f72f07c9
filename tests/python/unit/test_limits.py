"""Bounded input (#23): what a hostile or broken client sends the broker gets a 4xx with a hint,
through the broker's real HTTP app (router, middleware, the point set and control), never a 500,
a traceback or a stall; the broker serves the next request."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp.test_utils import TestClient, TestServer
from broker_fakes import FakeAgents, services

from raysleuth.broker.events import EventHub
from raysleuth.broker.http_api import make_app
from raysleuth.broker.points.service import PointService, PointSet
from raysleuth.broker.workers.control import Control
from raysleuth.broker.workers.inbox import cut_line
from raysleuth.shared import limits

TOKEN = "s3cret-" + "x" * 30
H = {"Authorization": f"Bearer {TOKEN}"}
F = "/work/train.py"


class Table:
    def workers_json(self):
        return []

    def workers(self):
        return []


@pytest.fixture
async def client(tmp_path):
    hub = EventHub()
    points = PointService(PointSet(tmp_path), FakeAgents(), hub, lambda: [], lambda: set())
    svc = services(TOKEN, Table(), hub=hub, points=points, control=Control(Table(), None, None))
    c = TestClient(TestServer(make_app(svc)))
    await c.start_server()
    yield c
    await c.close()


async def refused(resp, status: int, *words: str) -> dict:
    body = await resp.json()
    assert resp.status == status, body
    assert body["hint"] and all(w in body["error"] for w in words), body
    return body


DEEP = [
    "1+" * 100_000 + "1",
    "not " * 100_000 + "x",
    "(" * 5000 + "1" + ")" * 5000,
    "-" * 1500 + "x",
    "a" + "[0]" * 500,
]


@pytest.mark.parametrize("expr", DEEP, ids=["plus", "not", "parens", "unary", "subscripts"])
async def test_long_or_deep_expressions_are_a_400_everywhere(client, expr):
    deep_log = "x={a" + ".b" * 300 + "}"  # within the text's bound, too deep
    for method, path, body in [
        (
            "PUT",
            "/v1/breakpoints",
            {"path": F, "breakpoints": [{"line": 3, "condition": f"[rank 0] {expr}"}]},
        ),
        ("POST", "/v1/snapshots", {"path": F, "line": 3, "expressions": [expr]}),
        ("POST", "/v1/evaluate", {"expression": expr}),
        (
            "PUT",
            "/v1/breakpoints",
            {"path": F, "breakpoints": [{"line": 3, "logMessage": deep_log}]},
        ),
    ]:
        resp = await client.request(method, path, json=body, headers=H)
        body = await resp.json()
        assert resp.status == 400 and body["hint"], (method, path, body)
        assert "Internal error" not in body["error"] and ("long" in body["error"] or "nests" in body["error"])
    assert (await client.get("/v1/breakpoints", headers=H)).status == 200  # and it serves on


async def test_breakpoints_per_file_and_in_all_are_bounded(client, monkeypatch):
    many = [{"line": i} for i in range(1, limits.MAX_POINTS_PER_FILE + 2)]
    await refused(
        await client.put("/v1/breakpoints", json={"path": F, "breakpoints": many}, headers=H), 400, "at most"
    )
    monkeypatch.setattr("raysleuth.broker.points.service.MAX_POINTS", 5)
    for i in range(2):
        ok = await client.put(
            "/v1/breakpoints", json={"path": f"/w/{i}.py", "breakpoints": many[:2]}, headers=H
        )
        assert ok.status == 200
    resp = await client.put("/v1/breakpoints", json={"path": "/w/9.py", "breakpoints": many[:2]}, headers=H)
    await refused(resp, 400, "would hold 6 breakpoints", "at most 5")
    assert len(await (await client.get("/v1/breakpoints", headers=H)).json()) == 4  # nothing half-set


async def test_a_logpoint_text_is_bounded_and_its_lines_are_cut_when_served(client):
    huge = "x" * (limits.MAX_LOG_MESSAGE_CHARS + 1)
    body = {"path": F, "breakpoints": [{"line": 3, "logMessage": huge}]}
    await refused(await client.put("/v1/breakpoints", json=body, headers=H), 400, "logMessage is", "at most")
    fine = {"path": F, "breakpoints": [{"line": 3, "logMessage": "loss={loss} {not python}"}]}
    assert (await client.put("/v1/breakpoints", json=fine, headers=H)).status == 200  # logged as its error
    line = cut_line("y" * (limits.MAX_LOG_LINE_CHARS + 10))
    assert line.startswith("y" * limits.MAX_LOG_LINE_CHARS) and line.endswith("[10 more characters cut]")


@pytest.mark.parametrize("header", ["Bearer \xff\xfe", "Bearer \u00e9\u00e8", "Bearer " + "\U0001f600" * 4])
async def test_a_token_of_any_bytes_is_a_401_not_a_500(client, header):
    resp = await client.get(
        "/v1/workers", headers={"Authorization": header.encode("utf-8").decode("latin-1")}
    )
    assert resp.status == 401


async def raw_status(port: int, data: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    line = await asyncio.wait_for(reader.readline(), 10)
    writer.close()
    return line


async def test_a_body_declared_huge_or_never_sent_is_answered_at_once_or_in_time(client, monkeypatch):
    monkeypatch.setattr("raysleuth.broker.httpbody.HTTP_BODY_TIMEOUT_S", 0.5)
    head = f"PUT /v1/breakpoints HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n"
    huge = (head + "Content-Type: application/json\r\nContent-Length: 100000000000\r\n\r\n{").encode()
    assert b" 413 " in await raw_status(client.port, huge)
    slow = (head + "Content-Type: application/json\r\nContent-Length: 50\r\n\r\n{").encode()
    assert b" 408 " in await raw_status(client.port, slow)
