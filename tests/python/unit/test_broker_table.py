"""The worker table service, the timeline, the inbox and the post-mortem service, on fakes."""

from __future__ import annotations

import asyncio

from broker_fakes import FakeRelay, FakeRelays, FakeTable, worker

from raysleuth.broker.events import EventHub
from raysleuth.broker.points.service import PointSet
from raysleuth.broker.postmortem.crashes import CrashStore, hint_for
from raysleuth.broker.postmortem.filing import PostMortem, describe_exit, fault_frames
from raysleuth.broker.telemetry.gpu import GpuHistory
from raysleuth.broker.telemetry.timeline import Timeline
from raysleuth.broker.workers.inbox import Inbox
from raysleuth.broker.workers.snapshot import NODE_DIED, StateSnapshot, settle_dead_nodes
from raysleuth.broker.workers.table import WorkerTable

NOW = 1000.0


def report(wid, pid, **kw):
    d = {"id": wid, "pid": pid, "node_id": "n1", "node_ip": "127.0.0.1", "rank": None, "received": NOW - 1}
    d.update(kw)
    return d


def make_table(tmp_path):
    hub = EventHub()
    crashes = CrashStore(tmp_path)
    return WorkerTable(hub, crashes, GpuHistory(), clock=lambda: NOW), hub, crashes


def frames(q):
    out = []
    while not q.empty():
        out.append(q.get_nowait())
    return out


def test_the_table_publishes_workers_only_when_what_a_client_sees_changed(tmp_path):
    table, hub, _ = make_table(tmp_path)
    q = hub.subscribe()
    table.take_reports([report("w1", 11, rank=0)])
    assert [w.rank for w in table.workers()] == [0] and len(frames(q)) == 1
    table.take_reports([report("w1", 11, rank=0, received=NOW - 0.5)])  # only a timestamp moved
    assert frames(q) == []
    table.take_reports([report("w1", 11, rank=1)])
    assert len(frames(q)) == 1


def test_a_worker_we_resumed_reads_running_until_its_next_report(tmp_path):
    table, _, _ = make_table(tmp_path)
    where = {"path": "/t.py", "line": 3, "reason": "breakpoint"}
    table.take_reports([report("w1", 11, state="paused", paused_at=where, time=NOW - 2)])
    assert table.get("w1").state == "paused"
    table.resumed("w1")
    assert (table.get("w1").state, table.get("w1").paused_at) == ("idle", None)
    table.take_reports([report("w1", 11, state="paused", paused_at=where, time=NOW - 2)])
    assert table.get("w1").state == "idle"  # the same stale report again
    table.take_reports([report("w1", 11, state="paused", paused_at=where, time=NOW - 1)])
    assert table.get("w1").state == "paused"  # a new pause


def test_a_paused_worker_shows_since_when_and_the_nearest_timeout_that_ends_it(tmp_path):
    now = [NOW]
    table = WorkerTable(EventHub(), CrashStore(tmp_path), GpuHistory(), clock=lambda: now[0])
    where = {"path": "/t.py", "line": 3, "reason": "breakpoint"}
    deadlines = [
        {"what": "Ray Train's worker health check", "seconds": 600.0, "setting": "X"},
        {"what": "the other ranks' gloo collectives", "seconds": 120.0, "setting": "Y"},
    ]
    table.take_reports([report("w1", 11, state="paused", paused_at=where, deadlines=deadlines)])
    now[0] += 5
    table.take_reports([report("w1", 11, state="paused", paused_at=where, deadlines=deadlines)])
    w = table.get("w1")
    assert w.paused_since == NOW and w.deadline["at"] == NOW + 120 and w.deadline["setting"] == "Y"
    table.take_reports([report("w1", 11)])
    w = table.get("w1")
    assert (w.paused_since, w.deadline, w.deadlines) == (None, None, [])
    table.take_reports([report("w1", 11, state="paused", paused_at=where)])
    assert table.get("w1").paused_since == NOW + 5 and table.get("w1").deadline is None  # a new pause


def test_reports_of_workers_ended_long_enough_ago_can_be_forgotten(tmp_path):
    now = [NOW]
    table = WorkerTable(EventHub(), CrashStore(tmp_path), GpuHistory(), clock=lambda: now[0])
    table.take_reports(
        [report("live", 1, received=NOW), report("bye", 2, received=NOW, goodbye={"reason": "exit"})]
    )
    assert table.forgettable(30) == []
    now[0] += 31  # "live" heartbeats on; "bye" said goodbye 31 s ago
    table.take_reports(
        [report("live", 1, received=now[0]), report("bye", 2, received=NOW, goodbye={"reason": "exit"})]
    )
    assert table.forgettable(30) == ["bye"] and table.counts()["reports"] == 2


def test_a_link_that_holds_a_worker_stopped_shows_it_paused_there(tmp_path):
    table, hub, _ = make_table(tmp_path)
    table.take_reports([report("w1", 11, rank=0)])
    hub.emit(
        "link",
        {"worker": "w1", "stopped": True, "paused_at": {"path": "/t.py", "line": 3, "reason": "pause"}},
    )
    w = table.get("w1")
    assert w.state == "paused" and w.paused_at["line"] == 3
    hub.emit("link", {"worker": "w1", "stopped": False})
    assert table.get("w1").state == "idle"


def test_a_worker_a_link_let_run_pauses_anew_at_the_same_line(tmp_path):
    """Issue #13: a session ends (its link continues the worker), the worker stops at the same
    line again before its agent reported running: the second stop is a new pause."""
    now = [NOW]
    table = WorkerTable(EventHub(), CrashStore(tmp_path), GpuHistory(), clock=lambda: now[0])
    where = {"path": "/t.py", "line": 3, "reason": "breakpoint"}
    table.take_reports([report("w1", 11, state="paused", paused_at=where, time=NOW - 2)])
    table.hub.emit("link", {"worker": "w1", "stopped": True, "paused_at": where})
    first = table.get("w1").paused_since
    now[0] += 3
    table.hub.emit("link", {"worker": "w1", "stopped": False})  # the session ended: it runs
    assert table.get("w1").state != "paused", "the stale paused report does not count"
    table.hub.emit("link", {"worker": "w1", "stopped": True, "paused_at": where})  # the next step
    w = table.get("w1")
    assert w.state == "paused" and w.paused_since == NOW + 3 != first


def test_a_filed_crash_reaches_the_workers_row(tmp_path):
    table, hub, crashes = make_table(tmp_path)
    table.take_reports([report("w1", 11)])
    rec = crashes.add({"kind": "exception", "time": NOW, "exc_type": "ValueError", "worker": {"id": "w1"}})
    hub.emit("crash-filed", rec)
    assert table.get("w1").crash == rec.id


def test_ray_debugger_ports_come_from_paused_live_workers_only(tmp_path):
    table, _, _ = make_table(tmp_path)
    snap = StateSnapshot(
        workers=[
            {"worker_id": "a", "pid": 1, "is_alive": True, "debugger_port": 5000, "num_paused_threads": 1},
            {"worker_id": "b", "pid": 2, "is_alive": False, "debugger_port": 5001, "num_paused_threads": 1},
            {"worker_id": "c", "pid": 3, "is_alive": True, "debugger_port": 5002, "num_paused_threads": 0},
        ],
        time=NOW,
    )
    table.take_snapshot(snap)
    assert (table.ray_debugger_port("a"), table.ray_debugger_port("b"), table.ray_debugger_port("c")) == (
        5000,
        None,
        None,
    )
    assert table.ray_record("b")["pid"] == 2 and table.counts() == {"workers": 2, "agents": 0, "reports": 0}


def test_timeline_numbers_entries_and_filters_by_name():
    hub = EventHub()
    q = hub.subscribe()
    tl = Timeline(hub, clock=lambda: NOW)
    tl.add_event({"rank": 0, "worker": "w1", "pid": 1}, "step", None, {"loss": 1.0})
    tl.add_event({"rank": 1}, "eval", 5.0, "not a dict")
    line = tl.add_log({"rank": 0, "worker": "w1"}, {"message": "hi", "line": 3, "error": "NameError"})
    assert [e["seq"] for e in tl.events_since(0)] == [1, 2]
    assert tl.events_since(0, "eval")[0]["fields"] == {} and tl.events_since(0)[0]["time"] == NOW
    assert line["error"] is True and tl.logs_since(0) == [line] and tl.logs_since(1) == []
    assert b"event: log" in q.get_nowait()


def test_timeline_has_a_stopped_and_a_resumed_entry_per_pause():
    from types import SimpleNamespace as W

    clock = [NOW]
    tl = Timeline(EventHub(), clock=lambda: clock[0])
    at = {"path": "/t.py", "line": 7, "reason": "breakpoint"}
    paused = W(id="w1", rank=2, pid=11, state="paused", paused_at=at, paused_since=NOW - 1)
    tl.note_pauses([paused, W(id="w2", rank=0, pid=12, state="running", paused_at=None, paused_since=None)])
    tl.note_pauses([paused])  # the same pause: no second entry
    clock[0] = NOW + 4
    tl.note_pauses([W(id="w1", rank=2, pid=11, state="running", paused_at=None, paused_since=None)])
    got = [(e["name"], e["rank"], e["time"], e["fields"]) for e in tl.events_since(0)]
    assert got == [("stopped", 2, NOW - 1, at), ("resumed", 2, NOW + 4, {"seconds": 5.0})]


class Recorder:
    def __init__(self):
        self.crashes = []

    def add_crash(self, rec):
        self.crashes.append(rec)


def test_the_inbox_routes_each_kind_to_its_keeper(tmp_path):
    hub = EventHub()
    q = hub.subscribe()
    table = FakeTable([worker("w1", rank=3)])
    tl = Timeline(hub)
    points = PointSet(None)
    snap = points.add_snapshot({"path": "/t.py", "line": 2})
    pm = Recorder()
    inbox = Inbox(table, tl, points, pm, hub)
    inbox.route({"worker": "w1", "kind": "log", "data": {"message": "m"}})
    inbox.route(
        {
            "worker": "w1",
            "kind": "events",
            "data": {"items": [{"name": "step", "t": 1.0}, "junk"], "dropped": 2},
        }
    )
    inbox.route({"worker": "w1", "kind": "snapshot", "data": {"id": snap.id, "frames": [{"line": 2}]}})
    inbox.route({"worker": "w9", "kind": "crash", "data": {"kind": "exception", "rank": 5}})
    inbox.route({"worker": "w1", "kind": "mystery", "data": {}})
    assert tl.logs_since(0)[0]["rank"] == 3
    assert [e["name"] for e in tl.events_since(0)] == ["step", "events_dropped"]
    assert points.snapshot_rows(snap.id)[0]["rank"] == 3
    assert pm.crashes[0]["worker"] == {"id": "w9", "rank": 5, "worker": "w9", "pid": None}
    assert [f.split(b"\n")[0] for f in frames(q)] == [b"event: log", b"event: snapshot"]


def death(wid, exit_type="SYSTEM_ERROR", alive=False, pid=7):
    return {
        "worker_id": wid, "pid": pid, "node_id": "n1", "worker_type": "WORKER", "is_alive": alive,
        "exit_type": exit_type, "exit_detail": "killed by signal 9\nmore", "end_time_ms": 5000,
    }  # fmt: skip


async def test_a_worker_seen_alive_that_dies_hard_gets_one_record_with_its_fault_text(tmp_path):
    hub = EventHub()
    crashes = CrashStore(tmp_path)
    tl = Timeline(hub)
    fault = (
        "Fatal Python error: Segmentation fault\n\n"
        '  File "/t.py", line 9 in boom\n  File "/t.py", line 3 in run\n\n  File "/x.py", line 1 in other\n'
    )
    pm = PostMortem(crashes, tl, FakeTable([worker("w1", rank=2, pid=7)]), FakeRelays(FakeRelay(fault)), hub)
    filed = []
    hub.on("crash-filed", filed.append)
    pm.note_deaths(StateSnapshot(workers=[death("w1", alive=True)]), [])
    reports = [{"id": "w1", "fault_file": "/logs/f.log", "gpu": {"gpus": []}}]
    pm.note_deaths(StateSnapshot(workers=[death("w1")]), reports)
    pm.note_deaths(StateSnapshot(workers=[death("w1")]), reports)  # the same death again: no second record
    await asyncio.wait_for(pm.tasks.wait(), 5)
    [rec] = crashes.records()
    assert (rec.kind, rec.message, rec.worker["rank"]) == ("segfault", "killed by signal 9", 2)
    assert [f["function"] for f in rec.frames] == ["boom", "run"] and filed == [rec]
    assert tl.events_since(0, "crash")[0]["fields"]["crash"] == rec.id


async def test_deaths_that_are_no_news_get_no_record(tmp_path):
    hub = EventHub()
    crashes = CrashStore(tmp_path)
    relays = FakeRelays()
    pm = PostMortem(crashes, Timeline(hub), FakeTable(), relays, hub)
    # never seen alive; ended on purpose; an idle pool worker with no actor and no agent, whose
    # logs (asked once) hold no fatal Ray check
    pm.note_deaths(StateSnapshot(workers=[death("a"), death("b", "INTENDED_SYSTEM_EXIT", alive=True)]), [])
    pm.note_deaths(StateSnapshot(workers=[death("b", "INTENDED_SYSTEM_EXIT")]), [])
    pm.note_deaths(StateSnapshot(workers=[death("c", alive=True)]), [])
    pm.note_deaths(StateSnapshot(workers=[death("c")]), [])
    pm.note_deaths(StateSnapshot(workers=[death("c")]), [])
    await asyncio.wait_for(pm.tasks.wait(), 5)
    assert crashes.records() == [] and relays.asked == ["n1"]


async def test_a_worker_ray_aborted_gets_a_record_naming_the_check(tmp_path):
    """Even an idle worker whose agent never reported: Ray's fatal check is news (#22)."""
    hub = EventHub()
    crashes = CrashStore(tmp_path)
    check = {
        "check": "shared_lru.h:66: Check failed: value != nullptr",
        "file": "/l/w.err",
        "text": "[...] C",
    }
    pm = PostMortem(crashes, Timeline(hub), FakeTable(), FakeRelays(FakeRelay(fatal_check={"c": check})), hub)
    pm.note_deaths(StateSnapshot(workers=[death("c", alive=True)]), [])
    pm.note_deaths(StateSnapshot(workers=[death("c")]), [])
    await asyncio.wait_for(pm.tasks.wait(), 5)
    [rec] = crashes.records()
    assert (rec.kind, rec.worker["id"], rec.ray_check) == ("worker_died", "c", check)
    assert rec.message == "Ray aborted the worker: shared_lru.h:66: Check failed: value != nullptr"
    assert "shared_lru.h:66: Check failed: value != nullptr" in rec.hint and "/l/w.err" in rec.hint
    assert rec.to_json()["ray_check"] == check


async def test_a_node_death_records_the_busy_workers_it_took_not_the_idle_ones(tmp_path):
    """`settle_dead_nodes` turns a dead node's workers into NODE_DIED deaths: one that was paused
    or running gets a record (with a hint about the node); an idle one (a scale-down) none."""
    hub = EventHub()
    crashes = CrashStore(tmp_path)
    table = FakeTable([worker("busy", rank=1, pid=7, state="paused"), worker("idle", pid=8, state="idle")])
    pm = PostMortem(crashes, Timeline(hub), table, FakeRelays(), hub)
    nodes = [{"node_id": "n1", "state": "ALIVE"}]
    alive = [death("busy", alive=True, pid=7), death("idle", alive=True, pid=8)]
    reports = [{"id": "busy", "state": "paused"}, {"id": "idle", "state": "running"}]
    pm.note_deaths(settle_dead_nodes(StateSnapshot(workers=alive, nodes=nodes)), reports)
    dead = [dict(nodes[0], state="DEAD", state_message="removed")]
    pm.note_deaths(settle_dead_nodes(StateSnapshot(workers=alive, nodes=dead, time=9.0)), reports)
    await asyncio.wait_for(pm.tasks.wait(), 5)
    [rec] = crashes.records()
    assert (rec.kind, rec.exit_type, rec.worker["rank"]) == ("worker_died", NODE_DIED, 1)
    assert "removed" in rec.message and "node" in hint_for(rec)


def test_exit_causes_in_words():
    assert describe_exit(None) is None and describe_exit({"is_alive": True}) is None
    assert describe_exit(death("w", "NODE_OUT_OF_MEMORY")).startswith("the node ran out of memory")
    assert describe_exit(death("w", "WEIRD")) == "it exited (WEIRD): killed by signal 9"
    assert fault_frames(None) == []
