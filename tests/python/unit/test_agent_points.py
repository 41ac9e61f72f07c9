"""The agent's point table: a spec as the broker sends it becomes a model Point wrapped with this
worker's counters; scopes decide what is armed; counts survive a re-arm; a bad spec is reported."""

from __future__ import annotations

import os

from raysleuth.agent.points import ArmedPoint, PointTable
from raysleuth.model.point import Point


def spec(pid="p", **kw):
    return dict({"id": pid, "path": "/work/job.py", "line": 7}, **kw)


def test_armed_point_wraps_the_model_point_parsed_once():
    p = ArmedPoint.from_spec(
        spec(condition="[rank 0] step > 2", rest="step > 2", hitCondition="%3", scope={"ranks": [0]})
    )
    assert isinstance(p.point, Point) and p.point.condition == "[rank 0] step > 2"
    assert p.kind == "break" and p.line == 7
    assert eval(p.cond, {}, {"step": 3}) is True  # the Python part only, compiled once
    assert p.hit is p.point.hit and [n for n in range(1, 7) if p.hit(n)] == [3, 6]
    assert p.scope.match({"rank": 0}) is True and p.scope.match({"rank": 1}) is False


def test_a_log_message_makes_a_logpoint_and_count_defaults_to_no_limit():
    p = ArmedPoint.from_spec(spec(logMessage="x={x}"))
    assert (p.kind, p.log, p.count, p.cond) == ("log", "x={x}", 0, None)


def test_file_matches_by_path_or_by_the_relative_path_of_another_checkout():
    p = ArmedPoint.from_spec(spec(path="/editor/repo/pkg/job.py", rel=os.path.join("pkg", "job.py")))
    assert p.matches_file("/editor/repo/pkg/job.py")
    assert p.matches_file("/tmp/ray/session/working_dir/pkg/job.py")
    assert not p.matches_file("/tmp/other/job.py")


def test_build_drops_points_out_of_scope_and_keeps_counts_of_points_seen_before():
    first = PointTable.build([spec("a"), spec("b", scope={"ranks": [3]})], {"rank": 0}, None)
    assert [p.id for p in first.points] == ["a"]
    first.points[0].hits, first.points[0].fired = 5, 2
    second = PointTable.build([spec("a"), spec("c")], {"rank": 0}, first)
    by_id = {p.id: p for p in second.points}
    assert (by_id["a"].hits, by_id["a"].fired, by_id["c"].hits) == (5, 2, 0)


def test_a_dead_point_stays_out_until_the_broker_sends_a_new_one():
    first = PointTable.build([spec("s", kind="snapshot", count=1)], {"rank": 0}, None)
    first.points[0].dead = True
    assert PointTable.build([spec("s", kind="snapshot", count=1)], {"rank": 0}, first).points == []


def test_a_bad_spec_is_reported_not_raised():
    table = PointTable.build([spec("bad", rest="step >"), {"id": "noline", "path": "/x.py"}], {}, None)
    assert table.points == [] and set(table.errors) == {"bad", "noline"}
    assert table.errors["bad"].startswith("SyntaxError")


def test_add_records_only_the_points_on_lines_the_code_has():
    table = PointTable.build([spec("a"), spec("b", line=99)], {}, None)
    pts = table.points_for_file("/work/job.py")
    table.add("/work/job.py", pts, {6, 7, 8})
    assert table.armed == {"a"} and list(table.lines["/work/job.py"]) == [7]
    assert [p.id for p in table.missing()] == ["b"]
