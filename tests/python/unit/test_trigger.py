"""The in-worker light trigger, in this process: arming, conditions, hit counts, logpoints,
snapshots and disarming (no Ray; the stop into debugpy is covered by the integration tests)."""

from __future__ import annotations

import sys
import threading

import pytest

from raysleuth.agent import capture, hits
from raysleuth.agent import trigger as trig
from raysleuth.model.hits import HitCondition


class Recorder:
    """Stands in for the agent at its seam to the broker: collects what the trigger emits."""

    def __init__(self, rank=0):
        self.rank = rank
        self.emitted = []
        self.rearmed = 0
        import logging

        self.log = logging.getLogger("test-trigger")

    def identity(self):
        return {"rank": self.rank, "node_id": "ab12", "actor_class": "T"}

    def emit(self, kind, payload):
        self.emitted.append((kind, payload))

    def rearm_soon(self):
        self.rearmed += 1

    def poke(self):
        pass

    def logs(self):
        return [p["message"] for k, p in self.emitted if k == "log"]


def target(step):
    a = step * 2
    b = a + 1  # marked
    return b


def other_loop(n):
    total = 0
    for i in range(n):
        total += i
    return total


def make_closure():
    def inner(x):
        y = x + 1  # inner-line
        return y

    return inner


LINE_B = target.__code__.co_firstlineno + 2
INNER = make_closure.__code__.co_firstlineno + 2
FILE = __file__


def spec(pid, line=LINE_B, **kw):
    """A point's spec as the broker sends it: `rest` is the condition without its scope."""
    if "condition" in kw:
        kw["rest"] = kw["condition"]
    return dict({"id": pid, "path": FILE, "line": line}, **kw)


@pytest.fixture
def t():
    rec = Recorder()
    tr = trig.Trigger(rec)
    yield tr, rec
    tr.disarm_all()


def test_logpoint_with_condition_and_hit_condition(t):
    tr, rec = t
    tr.update(
        [spec("l", condition="step >= 1", hitCondition="%2", logMessage="a={a} s={step} {{x}}")], {"rank": 0}
    )
    assert tr.armed == {"l"}
    assert [target(i) for i in range(6)] == [1, 3, 5, 7, 9, 11]
    # step >= 1 passes for 1..5 (hits 1..5); %2 keeps hits 2 and 4: steps 2 and 4.
    assert rec.logs() == ["a=4 s=2 {x}", "a=8 s=4 {x}"]


def test_only_the_armed_function_is_touched(t):
    tr, _ = t
    before_other = other_loop.__code__
    tr.update([spec("l", logMessage="x")], {"rank": 0})
    assert other_loop.__code__ is before_other
    if tr.backend.name == "rewrite":
        assert target.__code__ is not tr.backend.original(target)
    assert sys.gettrace() is None


def test_disarm_restores_everything(t):
    tr, rec = t
    original = target.__code__
    tr.update([spec("l", logMessage="x")], {"rank": 0})
    target(0)
    tr.update([], {"rank": 0})
    target(1)
    assert rec.logs() == ["x"]
    assert target.__code__ is original
    assert tr.armed == set()


def test_scope_rules_a_worker_out(t):
    tr, rec = t
    tr.update([spec("l", logMessage="x", scope={"ranks": [3]})], {"rank": 0})
    assert tr.armed == set()  # never armed outside the scope
    rec.rank = None
    tr.update([spec("l", logMessage="x", scope={"ranks": [3]})], {"rank": None})
    assert tr.armed == {"l"}  # rank unknown: armed while it could still match
    target(0)
    assert rec.logs() == []  # ...but does not fire before the rank is known
    rec.rank = 1
    target(1)
    assert rec.logs() == [] and rec.rearmed == 1  # now ruled out: asks to be disarmed


def test_condition_error_is_reported_once_and_never_raises(t):
    tr, rec = t
    tr.update([spec("l", condition="undefined_name > 1", logMessage="x")], {"rank": 0})
    for i in range(3):
        assert target(i) == i * 2 + 1
    assert [p["message"] for k, p in rec.emitted] == [
        "condition raised NameError: name 'undefined_name' is not defined"
    ]


def test_snapshot_point_captures_locals_count_times(t):
    tr, rec = t
    tr.update([spec("s", kind="snapshot", snapshot="snap-1", count=2)], {"rank": 0})
    for i in range(4):
        target(i)
    snaps = [p for k, p in rec.emitted if k == "snapshot"]
    assert len(snaps) == 2 and rec.rearmed == 1
    top = snaps[1]["frames"][0]
    assert (top["function"], top["line"], top["locals"]) == ("target", LINE_B, {"step": "1", "a": "2"})
    assert snaps[1]["frames"][1]["function"] == "test_snapshot_point_captures_locals_count_times"


def test_nested_function_line(t):
    tr, rec = t
    inner_before = make_closure()
    tr.update([spec("n", line=INNER, logMessage="x={x}")], {"rank": 0})
    assert make_closure()(41) == 42  # made after arming: the parent's code carries the hook
    assert inner_before(1) == 2  # made before: found by the scan
    assert rec.logs() == ["x=41", "x=1"]


def test_relative_path_matches_another_checkout(t):
    tr, rec = t
    import os

    rel = os.path.join(os.path.basename(os.path.dirname(FILE)), os.path.basename(FILE))
    tr.update(
        [{"id": "r", "path": "/elsewhere/" + rel, "rel": rel, "line": LINE_B, "logMessage": "y"}], {"rank": 0}
    )
    target(0)
    assert rec.logs() == ["y"]


def test_hook_in_other_threads_and_recursion_guard(t):
    tr, rec = t
    tr.update([spec("l", condition="target(step + 1) > 0", logMessage="s={step}")], {"rank": 0})
    th = threading.Thread(target=target, args=(5,))
    th.start()
    th.join()
    assert rec.logs() == ["s=5"]  # the condition's own call of target() did not fire again


def test_log_rate_limit(t, monkeypatch):
    tr, rec = t
    now = [1000.25]
    monkeypatch.setattr(hits, "clock", lambda: now[0])  # one second, however loaded the machine
    tr.update([spec("l", logMessage="x")], {"rank": 0})
    for i in range(hits.LOG_RATE + 30):
        target(i)
    assert len(rec.logs()) == hits.LOG_RATE  # the 30 over are counted as dropped
    now[0] += 1.0  # the next second: lines flow again
    target(0)
    assert len(rec.logs()) > hits.LOG_RATE


@pytest.mark.parametrize(
    "text, expected",
    [("3", [3]), (">3", [4, 5, 6]), (">=5", [5, 6]), ("<2", [1]), ("%3", [3, 6]), ("==2", [2])],
)
def test_hit_condition_forms(text, expected):
    hc = HitCondition(text)
    assert [n for n in range(1, 7) if hc(n)] == expected


def test_bounded_repr_never_raises():
    class Bad:
        def __repr__(self):
            raise RuntimeError("no")

    assert "Bad" in capture.bounded_repr(Bad())
    assert len(capture.bounded_repr("x" * 10_000)) < 300


def test_a_call_during_a_re_arm_still_fires(t, monkeypatch):
    """The agent re-arms when a worker's rank becomes known, while the worker's code runs: that
    code keeps firing the points of the set before, never runs bare during the rescan."""
    tr, rec = t
    tr.update([spec("p1", logMessage="a={a}")], rec.identity())
    target(1)
    scan = tr._scan

    def scan_with_a_call(objects):
        target(2)  # the worker's thread, in the middle of the agent's rescan
        scan(objects)

    monkeypatch.setattr(tr, "_scan", scan_with_a_call)
    tr.update([spec("p1", logMessage="a={a}"), spec("p2", line=INNER, logMessage="x={x}")], rec.identity())
    monkeypatch.undo()
    target(3)
    make_closure()(4)
    assert rec.logs() == ["a=2", "a=4", "a=6", "x=4"]


def test_a_failure_behind_the_hook_never_reaches_the_task(t):
    """The seam to the broker failing (here: emit raises) is logged to the agent's log, and the
    armed function returns its value as if nothing were armed."""
    tr, rec = t

    def broken_emit(kind, payload):
        raise ConnectionError("registry gone")

    rec.emit = broken_emit
    tr.update([spec("l", logMessage="x")], rec.identity())
    assert [target(i) for i in range(3)] == [1, 3, 5]
