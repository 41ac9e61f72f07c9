"""No expression takes a worker hostage (#37): every entry point that sends code to the workers
(evaluate, a breakpoint's condition or logMessage, a snapshot's and a watch's expressions)
refuses what the language server's unbounded check flags with 400 {error, hint}, unless the body
says `force: true`; what is sent is a line of the audit log, with the local client's uid and pid.
The real HTTP app on a real loopback socket; the agents are a fake."""

from __future__ import annotations

import json
import os
import stat

import pytest
from aiohttp.test_utils import TestClient, TestServer
from broker_fakes import FakeAgents, services, worker

from raysleuth.broker.audit import AuditLog
from raysleuth.broker.cases.watches import WatchService
from raysleuth.broker.events import EventHub
from raysleuth.broker.http_api import make_app
from raysleuth.broker.points.service import PointService, PointSet
from raysleuth.broker.tasks import OwnedTasks
from raysleuth.broker.workers.control import Control

TOKEN = "s3cret-" + "y" * 30
H = {"Authorization": f"Bearer {TOKEN}"}
F = "/work/train.py"
HUGE = "sum(range(10**12))"


class Table:
    def __init__(self, workers=()):
        self._workers = list(workers)

    def workers_json(self):
        return [w.to_json() for w in self._workers]

    def workers(self):
        return self._workers

    def get(self, wid):
        return next((w for w in self._workers if w.id == wid), None)


class Leases:
    def get(self, wid):
        return None


@pytest.fixture
async def broker(tmp_path):
    hub = EventHub()
    agents = FakeAgents({"evaluate": lambda wid, cmd: {"ok": True, "value": "1", "type": "int"}})
    audit = AuditLog(tmp_path)
    points = PointService(PointSet(tmp_path), agents, hub, lambda: [], lambda: set(), audit)
    table = Table([worker("w0", rank=0, state="paused")])
    control = Control(table, agents, Leases(), audit=audit)
    watches = WatchService(points, hub, OwnedTasks("test"), lambda job: set())
    svc = services(TOKEN, table, hub=hub, points=points, control=control, watches=watches, audit=audit)
    c = TestClient(TestServer(make_app(svc), host="127.0.0.1"))
    await c.start_server()
    yield c, agents, audit
    await c.close()


BPS = "/v1/breakpoints"
SENDS = {
    "evaluate": ("POST", "/v1/evaluate", {"expression": HUGE}),
    "condition": ("PUT", BPS, {"path": F, "breakpoints": [{"line": 3, "condition": f"[rank 0] {HUGE}"}]}),
    "logMessage": ("PUT", BPS, {"path": F, "breakpoints": [{"line": 3, "logMessage": "s={" + HUGE + "}"}]}),
    "snapshot": ("POST", "/v1/snapshots", {"path": F, "line": 3, "expressions": ["loss", HUGE]}),
    "watch": ("POST", "/v1/watches", {"path": F, "line": 3, "expressions": [HUGE]}),
}  # fmt: skip


@pytest.mark.parametrize("entry", list(SENDS))
async def test_an_unbounded_expression_is_a_400_with_a_hint_and_reaches_no_worker(broker, entry):
    c, agents, audit = broker
    method, path, body = SENDS[entry]
    resp = await c.request(method, path, json=body, headers=H)
    said = await resp.json()
    assert resp.status == 400, said
    assert "may never finish" in said["error"] and "range(10 ** 12) has 10^12 items" in said["error"], said
    assert '"force": true' in said["hint"] and "GIL" in said["hint"], said
    assert agents.commands == [] and agents.point_sets == []  # nothing went to the workers
    assert not audit.path.exists()  # nothing ran, nothing to audit


@pytest.mark.parametrize("entry", list(SENDS))
async def test_force_sends_it_and_the_audit_log_names_the_client(broker, entry):
    c, agents, audit = broker
    method, path, body = SENDS[entry]
    resp = await c.request(method, path, json=dict(body, force=True), headers=H)
    assert resp.status == 200, await resp.json()
    assert agents.commands or agents.point_sets  # it went to the workers
    [line] = audit.path.read_text().splitlines()
    entry_ = json.loads(line)
    action = {"condition": "breakpoint", "logMessage": "breakpoint"}.get(entry, entry)
    assert entry_["action"] == action and entry_["force"] is True, entry_
    # This test process is the client on the loopback socket: its uid and its pid.
    assert entry_["client"]["uid"] == os.getuid() and entry_["client"]["pid"] == os.getpid(), entry_
    assert HUGE in json.dumps(entry_)
    if entry == "evaluate":
        assert entry_["workers"] == ["w0"] and entry_["ranks"] == [0]
    else:
        assert entry_["path"] == F and entry_["line"] == 3
    assert stat.S_IMODE(os.lstat(audit.path).st_mode) == 0o600
    listed = await (await c.get("/v1/audit?limit=5", headers=H)).json()
    assert listed == [entry_]


async def test_force_must_be_a_boolean_and_bounded_code_needs_none(broker):
    c, agents, audit = broker
    resp = await c.post("/v1/evaluate", json={"expression": HUGE, "force": "yes"}, headers=H)
    assert resp.status == 400 and "'force' must be true or false" in (await resp.json())["error"]
    resp = await c.post("/v1/evaluate", json={"expression": "sum(range(10))"}, headers=H)
    assert resp.status == 200 and (await resp.json())[0]["value"] == "1"
    resp = await c.get("/v1/audit?limit=0", headers=H)
    assert resp.status == 400 and (await resp.json())["hint"]


async def test_a_breakpoint_put_again_unchanged_is_not_audited_again(broker):
    c, _, audit = broker
    body = {"path": F, "breakpoints": [{"line": 3, "condition": "step == 1"}, {"line": 4}]}
    for _ in range(2):
        assert (await c.put("/v1/breakpoints", json=body, headers=H)).status == 200
    entries = [json.loads(x) for x in audit.path.read_text().splitlines()]
    assert [(e["action"], e["expression"], e["line"]) for e in entries] == [("breakpoint", "step == 1", 3)]
