"""First-divergence watches (issue 26): rows lined up by pass, the first pass where a rank differs
names it, the expression and the last pass all agreed; a watch files one divergence case and, with
stop, stops the ranks at the line once."""

from __future__ import annotations

import asyncio

import pytest

from raysleuth.broker.cases.watches import WatchService
from raysleuth.broker.events import EventHub
from raysleuth.broker.tasks import OwnedTasks
from raysleuth.model.divergence import KEEP_DONE, DivergenceFinder
from raysleuth.model.point import parse_watch
from raysleuth.shared.errors import BadRequest


def summary(norm: float, h: str) -> dict:
    return {
        "expression": "grad",
        "name": "grad",
        "shape": [1024],
        "dtype": "float32",
        "norm": norm,
        "mean": 0.0,
        "hash": h,
    }


def row(rank: int, n: int, drift: bool = False, step=None) -> dict:
    value = summary(1.0 + 1e-3, f"drift{n}") if drift else summary(1.0, f"same{n}")
    return {"rank": rank, "worker": f"w{rank}", "pass": n, "step": step, "values": [value]}


def test_the_first_pass_where_a_rank_drifts_names_it_and_the_last_agreement():
    f = DivergenceFinder(live=lambda: {0, 1, 2, 3})
    found = None
    for n in range(1, 10):
        for rank in range(4):
            found = f.add(row(rank, n, drift=(rank == 2 and n >= 7)), n) or found
    assert found is not None
    assert (found["pass"], found["ranks"], found["expression"], found["last_agreed_pass"]) == (
        7,
        [2],
        "grad",
        6,
    )
    assert "hash differs from the majority (3 of 4)" in found["why"]
    assert found["values"]["2"]["norm"] == pytest.approx(1.001) and found["values"]["0"]["norm"] == 1.0
    assert f.compared == 7


def test_ranks_that_agree_file_nothing_and_a_pass_waits_for_its_late_rank():
    f = DivergenceFinder(ranks={0, 1, 2, 3})
    for n in range(1, 6):
        for rank in (0, 1, 2):
            assert f.add(row(rank, n), n) is None
    assert f.compared == 0  # rank 3 has not passed yet: nothing is compared without it
    for n in range(1, 6):
        assert f.add(row(3, n), n) is None
    assert f.compared == 5 and f.divergence is None and f.last_agreed == 5


def test_a_long_watch_remembers_a_bounded_number_of_compared_passes():
    f = DivergenceFinder(ranks={0, 1})
    for n in range(1, KEEP_DONE + 500):
        for rank in (0, 1):
            f.add(row(rank, n), n)
    assert f.compared == KEEP_DONE + 499 and len(f.done) == KEEP_DONE and not f.passes
    assert f.add(row(0, KEEP_DONE + 400), KEEP_DONE + 400) is None and not f.passes  # late: ignored


def test_lined_up_by_a_step_local_when_ranks_pass_the_line_a_different_number_of_times():
    f = DivergenceFinder(ranks={0, 1, 2})
    for rank, n in ((0, 1), (1, 5), (2, 3)):  # rank 1 passed the line more often: the same step
        assert f.add(row(rank, 1, step=10) | {"pass": n}, 10) is None
    f.add(row(0, 2, step=11), 11)
    f.add(row(2, 2, step=11), 11)
    found = f.add(row(1, 6, drift=True, step=11), 11)
    assert found is not None and found["step"] == 11 and found["pass"] == 6 and found["ranks"] == [1]
    # rank 1's own count: it passed the line 5 times by step 10
    assert (found["last_agreed_pass"], found["last_agreed_step"]) == (5, 10)


def test_a_watch_body_is_checked():
    with pytest.raises(BadRequest, match="expressions"):
        parse_watch({"path": "/a.py", "line": 3}, "watch-1", 0.0)
    with pytest.raises(BadRequest, match="every"):
        parse_watch({"path": "/a.py", "line": 3, "expressions": ["g"], "every": 0}, "watch-1", 0.0)
    with pytest.raises(BadRequest, match="step"):
        parse_watch({"path": "/a.py", "line": 3, "expressions": ["g"], "step": "not a name"}, "watch-1", 0.0)
    p = parse_watch(
        {"path": "/a.py", "line": 3, "expressions": ["g"], "every": 10, "step": "step"}, "watch-1", 0.0
    )
    assert (p.kind, p.count, p.hit_condition, p.watch) == ("snapshot", 0, "%10", {"step": "step"})
    assert p.to_spec()["watch"] == {"step": "step"}


class Points:
    def __init__(self):
        self.added, self.put = [], []

    async def add_point(self, point):
        self.added.append(point)

    async def remove_snapshot(self, sid):
        self.added = [p for p in self.added if p.id != sid]

    async def put_file(self, body, who=""):
        self.put.append(body)
        return {}


async def test_a_watch_files_one_divergence_case_and_with_stop_stops_the_ranks_once():
    hub, points, tasks = EventHub(), Points(), OwnedTasks("test")
    cases: list = []
    hub.on("case", cases.append)
    svc = WatchService(
        points, hub, tasks, lambda job: {0, 1, 2, 3} if job == "05000000" else set(), clock=lambda: 123.0
    )
    with pytest.raises(BadRequest, match="rtol"):
        await svc.create({"path": "/t.py", "line": 8, "expressions": ["grad"], "rtol": -1})
    wid = (await svc.create({"path": "/t.py", "line": 8, "expressions": ["grad"], "stop": True}))["id"]
    assert points.added[0].id == wid and points.added[0].watch == {"step": None}
    for n in range(1, 10):
        for rank in range(4):
            hub.emit("watch-row", (wid, dict(row(rank, n, drift=(rank == 2 and n >= 7)), job_id="05000000")))
    [case] = cases
    assert case.kind == "divergence" and case.ranks == [2] and case.job_id == "05000000"
    assert case.summary.startswith("rank 2 diverged from 0-1,3 at pass 7 at t.py:8: grad (hash differs")
    assert case.summary.endswith("; all agreed at pass 6")
    got = svc.get(wid).to_json()
    assert got["divergence"] == {"pass": 7, "step": None, "ranks": [2], "expression": "grad", "case": case.id}
    assert got["passes"] == 9 and got["ranks"] == [0, 1, 2, 3]
    await asyncio.sleep(0)
    await tasks.close()
    [put] = points.put
    assert put["owner"] == f"watch:{wid}" and put["breakpoints"] == [
        {"line": 8, "ranks": [0, 1, 2, 3], "hitCondition": "1"}
    ]
    await svc.delete(wid)
    assert points.added == []


async def test_a_watch_lined_up_by_step_names_the_step_and_the_pass_of_the_last_agreement():
    hub, points, tasks = EventHub(), Points(), OwnedTasks("test")
    cases: list = []
    hub.on("case", cases.append)
    svc = WatchService(points, hub, tasks, lambda job: {0, 1, 2}, clock=lambda: 123.0)
    wid = (await svc.create({"path": "/t.py", "line": 8, "expressions": ["grad"], "step": "step"}))["id"]
    for n in range(1, 9):  # pass n is step n - 1; rank 1 drifts from step 6
        for rank in range(3):
            r = row(rank, n, drift=(rank == 1 and n >= 7), step=n - 1)
            hub.emit("watch-row", (wid, dict(r, job_id="05000000")))
    [case] = cases
    assert " at pass 7 (step 6) at t.py:8" in case.summary, case.summary
    assert case.summary.endswith("; all agreed at pass 6 (step 5)"), case.summary
    assert (case.evidence["last_agreed_pass"], case.evidence["last_agreed_step"]) == (6, 5)
    await tasks.close()
