"""Evaluate/continue/pause across workers, link leases, node relays and the doctor, on fakes."""

from __future__ import annotations

import asyncio

import pytest
from broker_fakes import FakeAgents, FakeRelays, FakeTable, Remote, worker

from raysleuth.broker.debug.leases import LinkLeases
from raysleuth.broker.debug.relays import RelayPool
from raysleuth.broker.events import EventHub
from raysleuth.broker.radar.doctor import Doctor
from raysleuth.broker.workers.control import Control
from raysleuth.shared.errors import BadRequest, SleuthError


class FakeLink:
    """A WorkerLink: records requests; `stopped` threads until continued."""

    opened: list[str] = []

    def __init__(self, worker, *, relays, agents, ray_debugger_port, on_change, on_closed):
        self.worker, self.worker_id = worker, worker.id
        self.on_change, self.on_closed = on_change, on_closed
        self.lease = None
        self.stopped: dict = {}
        self.paused_at = None
        self.pause_pending = None
        self.closed = asyncio.Event()
        self.requests: list[tuple[str, dict]] = []

    def __str__(self):
        return f"FakeLink[{self.worker_id}]"

    async def open(self, progress=None):
        if self.worker.actor_name == "fails to open":
            raise SleuthError("no debugger", "hint")
        FakeLink.opened.append(self.worker_id)
        await asyncio.sleep(0)

    async def request(self, command, arguments=None, timeout=60.0):
        self.requests.append((command, arguments or {}))
        if command == "threads":
            return {"body": {"threads": [{"id": 7, "name": "Thread-1"}, {"id": 1, "name": "MainThread"}]}}
        if command == "pause" and self.worker.actor_name != "in native code":
            self.stop(arguments["threadId"])
        if command == "continue":
            if arguments["threadId"] not in self.stopped:  # as debugpy: no answer until it runs
                raise asyncio.TimeoutError
            self.stopped.pop(arguments["threadId"], None)
            self.on_change()
        return {"success": True, "body": {}}

    async def wait_stopped(self, timeout):
        return bool(self.stopped)

    async def step(self, kind, thread_id, timeout):
        self.requests.append((kind, {"threadId": thread_id}))
        return True  # stopped again on the next line

    async def close(self, reason="closed"):
        self.closed.set()
        self.on_closed(self)

    def stop(self, tid=1):
        self.stopped[tid] = {"reason": "breakpoint"}
        self.paused_at = {"path": "/t.py", "line": 4, "reason": "breakpoint"}
        self.on_change()


def setup(workers, answers=None, idle_s=60.0):
    hub = EventHub()
    table = FakeTable(workers)
    agents = FakeAgents(answers)
    leases = LinkLeases(FakeRelays(), agents, table, hub, idle_s=idle_s, link_class=FakeLink)
    changes = []
    hub.on("link", changes.append)
    return Control(table, agents, leases), leases, agents, changes


async def test_evaluate_answers_per_paused_rank_in_rank_order_and_one_failure_stays_in_its_row():
    def answer(wid, cmd):
        if wid == "w2":
            raise RuntimeError("actor died")
        return {"ok": True, "value": f"{wid}:{cmd['expression']}", "type": "str", "path": "/t.py", "line": 3}

    ws = [
        worker("w3", rank=3, state="paused"),
        worker("w1", rank=1, state="paused"),
        worker("w2", rank=2, state="paused"),
    ]
    ws += [worker("w0", rank=0, state="running"), worker("w4", rank=4, state="paused", agent=False)]
    control, *_ = setup(ws, {"evaluate": answer})
    rows = await control.evaluate({"expression": "loss"})
    assert [r["rank"] for r in rows] == [1, 2, 3]
    assert rows[0]["value"] == "w1:loss" and rows[0]["at"] == {"path": "/t.py", "line": 3}
    assert "actor died" in rows[1]["error"]
    assert [r["worker"] for r in await control.evaluate({"expression": "x", "ranks": [3]})] == ["w3"]


@pytest.mark.parametrize(
    "body, words",
    [({}, "missing"), ({"expression": "a +"}, "not a Python expression"),
     ({"expression": "a", "ranks": "0"}, "ranks"), ({"expression": "a", "ranks": [True]}, "ranks"),
     ({"expression": "a", "workers": [1]}, "workers")],
)  # fmt: skip
async def test_bad_evaluate_requests_say_how(body, words):
    control, *_ = setup([worker("w1", rank=1, state="paused")])
    with pytest.raises(BadRequest) as err:
        await control.evaluate(body)
    assert words in err.value.message and err.value.hint


async def test_a_continue_or_pause_naming_something_else_is_refused_and_touches_nobody():
    ws = [worker("w1", rank=0, state="running"), worker("w2", rank=1, state="paused")]
    control, leases, agents, _ = setup(ws)
    for call, route in ((control.pause, "POST /v1/pause"), (control.continue_paused, "POST /v1/continue")):
        with pytest.raises(BadRequest) as err:
            await call({"a": {"a": {}}, "ranks": [0, 1]})
        assert (
            err.value.message == f"{route} takes only 'ranks', 'workers' and 'group', not 'a'"
            and err.value.hint
        )
    assert leases.get("w1") is None and agents.commands == []


async def test_continue_goes_through_a_stopped_link_else_the_agent_and_says_who_was_skipped():
    ws = [
        worker("w1", rank=1, state="paused"),
        worker("w2", rank=2, state="paused"),
        worker("w3", rank=3, state="paused"),
    ]
    answers = {
        "resume": lambda wid, cmd: {"ok": True, "resumed": 1} if wid == "w2" else {"ok": True, "resumed": 0}
    }
    control, leases, agents, changes = setup(ws, answers)
    link = await leases.lease(ws[0], None)
    link.stop()
    assert changes[-1] == {"worker": "w1", "stopped": True, "paused_at": link.paused_at}
    res = await control.continue_paused({})
    assert res["continued"] == ["w1", "w2"] and res["skipped"][0]["worker"] == "w3"
    assert "attach to continue" in res["skipped"][0]["reason"]
    assert ("continue", {"threadId": 1}) in link.requests and changes[-1]["stopped"] is False
    assert [w for w, c in agents.commands if c["op"] == "resume"] == ["w2", "w3"]
    assert [w.state for w in ws[1:]] == ["running", "paused"]  # the table heard of w2 at once


async def test_pause_stops_the_main_thread_of_running_agent_workers():
    ws = [worker("w1", rank=0, state="running"), worker("w2", rank=1, state="idle", agent=False)]
    control, leases, *_ = setup(ws)
    res = await control.pause({})
    assert res["paused"] == ["w1"] and res["skipped"][0]["reason"] == "no Ray Sleuth agent in this worker"
    assert res["pending"] == []
    assert ("pause", {"threadId": 1}) in leases.get("w1").requests


async def test_pause_reaches_a_worker_an_editor_session_debugs_through_its_link():
    """Issue 25: Pause on the Ray cluster session paused nothing: every worker with a session
    was skipped as "being debugged by another session". Its session's link takes the pause."""
    ws = [worker("w1", rank=0, state="running"), worker("w2", rank=1, state="running")]
    control, leases, *_ = setup(ws)
    session = object()
    link = await leases.lease(ws[0], session)
    res = await control.pause({})
    assert sorted(res["paused"]) == ["w1", "w2"] and res["skipped"] == []
    assert ("pause", {"threadId": 1}) in link.requests and link.lease is session  # still the session's


async def test_a_pause_not_taken_yet_is_pending_with_why_and_continue_cancels_it():
    ws = [
        worker("w1", rank=1, state="running"),
        worker("w3", rank=3, state="idle", actor_name="in native code"),
    ]
    control, leases, *_ = setup(ws)
    res = await control.pause({"ranks": [1, 3]})
    assert res["paused"] == ["w1"] and [p["worker"] for p in res["pending"]] == ["w3"]
    assert "native code" in res["pending"][0]["reason"] and "continue" in res["pending"][0]["reason"]
    assert leases.get("w3").pause_pending == 1
    ws[0].state = "paused"
    res = await control.continue_paused({})
    assert res["continued"] == ["w1"] and res["cancelled"] == ["w3"]
    assert ("continue", {"threadId": 1}) in leases.get("w3").requests
    assert leases.get("w3").pause_pending is None
    assert (await control.continue_paused({}))["cancelled"] == []  # once


async def test_continue_takes_a_stop_the_table_has_not_shown_yet():
    """CI, stop 35: a pending pause taken just before the continue, its line still being found,
    so the table said running: the continue neither continued nor cancelled it, and it stayed
    paused. A link's stop counts at once, and a cancel whose stop came meanwhile resumes it."""
    ws = [
        worker("w1", rank=0, state="paused"),
        worker("w2", rank=1, state="running", actor_name="in native code"),
        worker("w3", rank=2, state="idle", actor_name="in native code"),
    ]
    control, leases, *_ = setup(ws)
    res = await control.pause({})
    assert sorted(p["worker"] for p in res["pending"]) == ["w2", "w3"]
    w2, w3 = leases.get("w2"), leases.get("w3")
    w2.stopped[1] = {"reason": "pause"}  # the stop arrived; the table not told yet
    w2.pause_pending = None
    plain = w2.request

    async def continue_as_w3_stops(command, arguments=None, timeout=60.0):
        if command == "continue":  # rank 2's pending pause is taken while rank 1 is continued
            w3.stopped[1], w3.pause_pending = {"reason": "pause"}, None
        return await plain(command, arguments, timeout)

    w2.request = continue_as_w3_stops
    res = await control.continue_paused({"ranks": [1, 2]})
    assert res["continued"] == ["w2"] and res["cancelled"] == ["w3"], res
    assert not w2.stopped and ("continue", {"threadId": 1}) in w2.requests
    assert not w3.stopped and ("continue", {"threadId": 1}) in w3.requests
    assert ws[0].state == "paused"  # rank 0 was not selected


async def test_evaluate_and_step_reach_a_stop_the_table_has_not_shown_yet():
    """Right after POST /v1/pause answered `paused`, an evaluate or a group step found no paused
    rank until the broker had asked debugpy where the worker stopped."""
    ws = [worker("w0", rank=0, state="running"), worker("w1", rank=1, state="running")]
    answers = {"evaluate": lambda wid, cmd: {"ok": True, "value": wid, "type": "str"}}
    control, leases, *_ = setup(ws, answers)
    assert (await control.pause({"ranks": [0]}))["paused"] == ["w0"]
    assert [r["worker"] for r in await control.evaluate({"expression": "x"})] == ["w0"]
    res = await control.step({})
    assert [s["worker"] for s in res["stepped"]] == ["w0"] and res["skipped"] == []


async def test_one_link_per_worker_shared_by_concurrent_opens_and_leased_to_one_session():
    FakeLink.opened.clear()
    w = worker("w1", rank=0)
    _, leases, *_ = setup([w])
    a, b = await asyncio.gather(leases.lease(w, "s1"), leases.lease(w, "s1"))
    assert a is b and FakeLink.opened == ["w1"]
    with pytest.raises(SleuthError) as err:
        await leases.lease(w, "s2")
    assert "another session" in err.value.message and err.value.hint


async def test_a_released_link_clears_the_sessions_breakpoints_lets_the_worker_go_and_idles_out():
    w = worker("w1", rank=0)
    _, leases, *_ = setup([w], idle_s=0.01)

    class Session:
        breakpoint_sources = {"/t.py"}

    s = Session()
    link = await leases.lease(w, s)
    link.stop()
    await leases.release(link, s)
    assert link.lease is None and not link.stopped
    assert ("setBreakpoints", {"source": {"path": "/t.py"}, "breakpoints": []}) in link.requests
    await asyncio.wait_for(link.closed.wait(), 2)  # idle: closed by itself
    assert leases.get("w1") is None and ("disconnect", {"terminateDebuggee": False}) in link.requests


async def test_a_failed_open_leaves_no_link_and_says_why():
    w = worker("w1", actor_name="fails to open")
    _, leases, *_ = setup([w])
    with pytest.raises(SleuthError, match="no debugger"):
        await leases.lease(w, "s")
    assert len(leases) == 0


async def test_describe_exit_waits_for_rays_record():
    _, leases, *_ = setup([])
    leases.table.ray_records["w1"] = {
        "is_alive": False,
        "exit_type": "INTENDED_SYSTEM_EXIT",
        "exit_detail": "",
    }
    assert (await leases.describe_exit("w1")).startswith("it was stopped on purpose")
    assert "may have exited" in await leases.describe_exit("w2", wait=0.05)


async def test_relays_start_once_per_node_and_a_failed_start_can_be_retried():
    starts = []
    gate = asyncio.Event()

    async def start(node_id):
        starts.append(node_id)
        await gate.wait()
        if node_id == "bad" and starts.count("bad") == 1:
            raise RuntimeError("node is dead")
        return f"relay-{node_id}"

    pool = RelayPool(start=start)
    pool.ensure([{"node_id": "n1", "state": "ALIVE"}, {"node_id": "n2", "state": "DEAD"}])
    waiting = asyncio.gather(pool.relay_for("n1"), pool.relay_for("n1"))
    bad = asyncio.ensure_future(pool.relay_for("bad"))
    await asyncio.sleep(0)
    gate.set()
    assert await waiting == ["relay-n1", "relay-n1"] and starts.count("n1") == 1
    with pytest.raises(SleuthError) as err:
        await bad
    assert "node is dead" in err.value.message and "ray status" in err.value.hint
    assert await pool.relay_for("bad") == "relay-bad"
    with pytest.raises(SleuthError):
        await pool.relay_for(None)


async def test_closing_the_pool_cancels_starts_still_running():
    async def start(node_id):
        await asyncio.sleep(3600)

    pool = RelayPool(start=start)
    pool.ensure([{"node_id": "n1", "state": "ALIVE"}])
    await asyncio.sleep(0)
    await asyncio.wait_for(pool.close(), 2)
    with pytest.raises(SleuthError, match="stopping"):
        await pool.relay_for("n2")


async def test_the_doctor_reports_a_node_that_cannot_answer_as_failed():
    table = FakeTable([worker("w1"), worker("w2", agent=False)])
    ok = Doctor(table, FakeRelays(), lambda: ("127.0.0.1", "http://127.0.0.1:1", "127.0.0.1:2"))
    report = await ok.report()
    assert report["ok"] and report["nodes"][0]["checks"][0]["check"] == "python"
    assert [c["status"] for c in report["broker"]] == ["ok", "warn", "ok"]
    down = Doctor(table, FakeRelays(fail=RuntimeError("gone")), lambda: ("0.0.0.0", "u", "d"))
    report = await down.report()
    assert not report["ok"] and "gone" in report["nodes"][0]["checks"][0]["detail"]
    assert report["broker"][2]["status"] == "info"


class FakeRegistry:
    """The registry actor's methods the broker's Agents service calls."""

    def __init__(self):
        self.watch = []
        self.points = []
        self.set_points = Remote(lambda specs: self.points.append(specs) or f"v{len(self.points)}")
        self.set_watch = Remote(lambda watched, hold: self.watch.append((watched, hold)))
        self.command = Remote(lambda wid, cmd, timeout: {"ok": True, "worker": wid, "op": cmd["op"]})
        self.changes = Remote(lambda since, wait: {"version": since + 1, "reports": []})


async def test_the_agents_service_speaks_to_the_registry_and_leaves_the_set_in_rays_kv(monkeypatch):
    from raysleuth.broker.workers import agents as agents_mod

    kv = []
    monkeypatch.setattr(agents_mod, "kv_put_points", kv.append)
    agents = agents_mod.Agents(hold_s=90.0)
    with pytest.raises(SleuthError) as err:  # before the registry runs: a clear error, not a crash
        await agents.command("w1", {"op": "ping"}, 1.0)
    assert err.value.hint
    await agents.set_points([{"id": "bp-1"}])  # nothing to tell yet: no error either
    agents.registry = reg = FakeRegistry()
    await agents.set_points([{"id": "bp-1"}])
    assert reg.points == [[{"id": "bp-1"}]] and kv == [{"version": "v1", "points": [{"id": "bp-1"}]}]
    await agents.set_watch(True)
    assert reg.watch == [(True, 90.0)]
    assert (await agents.command("w1", {"op": "ping"}, 1.0))["worker"] == "w1"
    assert (await agents.changes(4, 0.1))["version"] == 5
