"""Cluster breakpoints: set once through the broker, armed in every matching worker by the agent's
light trigger, for real (real Ray workers, real debugpy, the real broker and DAP front door)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys

import cluster_bp
import pytest
import ray
from helpers import FIXTURES, dap_address, marker_line, stopped_frames, wait_until

from raysleuth.dap.client import open_session
from raysleuth.shared.errors import SleuthError

JOB = str(FIXTURES / "cluster_bp.py")
LINE = marker_line(JOB, "cbp-line")
NEXT = marker_line(JOB, "cbp-next")
SPIN = marker_line(JOB, "cbp-spin")
RANKS = 4
EXPECTED = [[(r * 10 + s) * 2 for s in range(3)] for r in range(RANKS)]


@pytest.fixture
def clean_points(client):
    client.delete("/v1/breakpoints")
    yield
    client.delete("/v1/breakpoints")
    for s in client.get("/v1/snapshots"):
        client.delete(f"/v1/snapshots/{s['id']}")


@pytest.fixture
def ranked(ray_cluster, client, clean_points):
    cls = ray.remote(num_cpus=0)(cluster_bp.Ranked)
    actors = [cls.remote(r, RANKS) for r in range(RANKS)]
    pids = ray.get([a.pid.remote() for a in actors])
    wait_until(
        lambda: len([w for w in client.workers() if w["pid"] in pids and w["rank"] is not None]) == RANKS,
        timeout=15,
        message="4 ranked workers listed",
    )
    yield actors, pids
    client.post("/v1/continue", {})
    for a in actors:
        ray.kill(a)


def armed(client, line=LINE) -> int:
    return sum(b["armed"] for b in client.breakpoints() if b["line"] == line)


def by_pid(client, pid):
    return next(w for w in client.workers() if w["pid"] == pid)


def listed(client, pid):
    """The worker of `pid` as listed now, or None (Ray's State API lists a new worker a moment late)."""
    return next((w for w in client.workers() if w["pid"] == pid), None)


def paused_pids(client, pids):
    return {w["pid"] for w in client.workers() if w["pid"] in pids and w["state"] == "paused"}


@pytest.mark.smoke
def test_rank_scope_stops_only_that_rank(client, ranked):
    actors, pids = ranked
    res = client.set_breakpoints(JOB, [{"line": LINE, "condition": "[rank 2] step == 1"}])
    assert res["breakpoints"][0]["scope"] == "rank 2"
    wait_until(lambda: armed(client) == 1, 10, message="armed in exactly the one worker of rank 2")
    refs = [a.work.remote(3) for a in actors]
    others = [refs[r] for r in (0, 1, 3)]
    assert ray.get(others, timeout=30) == [EXPECTED[r] for r in (0, 1, 3)]
    w = wait_until(lambda: (x := by_pid(client, pids[2]))["state"] == "paused" and x["paused_at"] and x, 10)
    assert w["paused_at"]["line"] == LINE and w["paused_at"]["path"] == JOB
    assert paused_pids(client, pids) == {pids[2]}
    # Evaluate on all paused ranks: only rank 2 answers, in its frame.
    rows = client.post("/v1/evaluate", {"expression": "(self.rank, step)"})
    assert [(r["rank"], r.get("value")) for r in rows] == [(2, "(2, 1)")], rows
    res = client.post("/v1/continue", {"ranks": [2]})
    assert res["continued"] == [w["id"]]
    assert ray.get(refs[2], timeout=30) == EXPECTED[2]


def test_first_rank_stops_rank_0_and_plain_tasks_not_the_other_ranks(client, ranked):
    """Issue 25 item 7: a plain gutter click (firstRank, the extension's default) in a ranked job
    stops rank 0 only; the other ranks pass the line; a worker without a rank stops as usual."""
    actors, pids = ranked
    res = client.set_breakpoints(JOB, [{"line": LINE, "condition": "step == 1", "firstRank": True}])
    [point] = res["breakpoints"]
    assert point["scope"] == "first rank" and point["ranks"] is None
    wait_until(lambda: point["id"] in by_pid(client, pids[0])["armed"], 10, message="armed on rank 0")
    assert not any(point["id"] in by_pid(client, p)["armed"] for p in pids[1:])
    refs = [a.work.remote(3) for a in actors]
    assert ray.get(refs[1:], timeout=30) == EXPECTED[1:]  # ranks 1-3 passed the line, never stopped
    w = wait_until(lambda: (x := by_pid(client, pids[0]))["state"] == "paused" and x["paused_at"] and x, 15)
    assert w["paused_at"]["line"] == LINE
    helper = ray.remote(num_cpus=0)(cluster_bp.Unranked).remote()
    helper_pid = ray.get(helper.pid.remote(), timeout=30)
    try:
        call = helper.one.remote(1)
        plain = wait_until(
            lambda: (w := listed(client, helper_pid)) and w["state"] == "paused" and w["paused_at"] and w,
            30,
            message="the worker without a rank paused at the line",
        )
        assert plain["rank"] is None and plain["paused_at"]["line"] == LINE
        assert paused_pids(client, pids) == {pids[0]}
        client.post("/v1/continue", {})
        assert ray.get(refs[0], timeout=30) == EXPECTED[0]
        assert ray.get(call, timeout=30) == (7 * 10 + 1) * 2
    finally:  # a worker without a rank arms rank-scoped points too: gone before the next test
        client.post("/v1/continue", {})
        ray.kill(helper)
        wait_until(
            lambda: (w := listed(client, helper_pid)) is None or w["state"] == "exited", 30,
            message="the helper gone",
        )  # fmt: skip


def test_an_evaluate_that_never_ends_leaves_the_paused_worker_controllable(client, ranked):
    """#23: an evaluate over its budget is answered "still running"; the next evaluate and the
    continue still reach the worker (the budget is 3 s in this suite: conftest.py)."""
    actors, pids = ranked
    client.set_breakpoints(JOB, [{"line": LINE, "condition": "[rank 1] step == 1"}])
    wait_until(lambda: armed(client) == 1, 10, message="armed in rank 1")
    ref = actors[1].work.remote(3)
    wait_until(lambda: by_pid(client, pids[1])["state"] == "paused", 15, message="rank 1 paused")
    [stuck] = client.post("/v1/evaluate", {"expression": "__import__('time').sleep(40)", "ranks": [1]})
    assert stuck["error"].startswith("still running after 3 s"), stuck
    [four] = client.post("/v1/evaluate", {"expression": "2 + 2", "ranks": [1]})
    assert four.get("value") == "4", (stuck, four)
    client.set_breakpoints(JOB, [])
    assert client.post("/v1/continue", {"ranks": [1]})["continued"]
    assert ray.get(ref, timeout=30) == EXPECTED[1]


def test_a_condition_over_its_budget_disarms_its_point_with_a_note(client, ranked):
    actors, _ = ranked
    since = max([x["seq"] for x in client.get("/v1/logs")] or [0])
    slow = "[rank 3] __import__('time').sleep(1.2) or step == 1"  # the budget is 1 s
    client.set_breakpoints(JOB, [{"line": LINE, "condition": slow}])
    wait_until(lambda: armed(client) == 1, 10, message="armed in rank 3")
    assert ray.get(actors[3].work.remote(3), timeout=60) == EXPECTED[3]  # it never stopped
    note = wait_until(
        lambda: next((x for x in client.get(f"/v1/logs?since={since}") if x.get("error")), None),
        15,
        message="the disarm note",
    )
    assert note["message"].startswith("disarmed: the condition ran 1.") and note["rank"] == 3, note
    wait_until(lambda: armed(client) == 0, 15, message="disarmed in rank 3")
    client.set_breakpoints(JOB, [])


def test_all_stop_pauses_the_jobs_other_ranks_when_one_stops(client, ranked):
    actors, pids = ranked
    assert client.put("/v1/settings", {"all_stop": True}) == {"all_stop": True}
    try:
        client.set_breakpoints(JOB, [{"line": LINE, "condition": "[rank 0] step == 1"}])
        wait_until(lambda: armed(client) == 1, 10, message="armed in rank 0")
        spins = [actors[r].spin.remote(20.0) for r in (1, 2, 3)]
        wait_until(
            lambda: all(by_pid(client, pids[r])["state"] == "running" for r in (1, 2, 3)),
            10,
            message="spinning",
        )
        ref0 = actors[0].work.remote(3)
        wait_until(lambda: paused_pids(client, pids) == set(pids), 15, 0.2, "rank 0 stopped, then the others")
        assert by_pid(client, pids[0])["paused_at"]["line"] == LINE
        assert {by_pid(client, pids[r])["paused_at"]["line"] for r in (1, 2, 3)} <= {SPIN, SPIN - 1}
        res = client.post("/v1/continue", {})
        assert {by_pid(client, p)["id"] for p in pids} <= set(res["continued"])
        assert ray.get(ref0, timeout=30) == EXPECTED[0]
        assert all(n > 0 for n in ray.get(spins, timeout=30))
    finally:
        client.put("/v1/settings", {"all_stop": False})


def test_worker_created_after_put_is_armed(client, ray_cluster, clean_points):
    """Ray may hand the new actor a pool worker that started before the PUT and never ran a task
    (it has not met the broker yet): its first task reads the points from Ray's KV."""
    client.set_breakpoints(JOB, [{"line": LINE, "condition": "step == 0", "logMessage": "late {self.rank}"}])
    cls = ray.remote(num_cpus=0)(cluster_bp.Ranked)
    late = cls.remote(7, 8)
    try:
        assert ray.get(late.work.remote(1), timeout=30) == [140]
        lines = wait_until(
            lambda: [r for r in client.get("/v1/logs") if r["message"] == "late 7"] or None,
            10,
            0.1,
            "late log",
        )
        assert lines[0]["rank"] == 7
    finally:
        ray.kill(late)


def test_condition_hit_condition_and_logpoint_across_workers(client, ranked):
    actors, pids = ranked
    seen = client.get("/v1/logs")
    since = seen[-1]["seq"] if seen else 0
    client.set_breakpoints(
        JOB,
        [
            {
                "line": NEXT,
                "condition": "step >= 1",
                "hitCondition": "2",
                "logMessage": "r{self.rank} s{step} l{loss}",
            },
        ],
    )
    wait_until(lambda: armed(client, NEXT) == RANKS, 10, message="logpoint armed on 4 workers")
    assert ray.get([a.work.remote(4) for a in actors], timeout=30) == [
        [(r * 10 + s) * 2 for s in range(4)] for r in range(RANKS)
    ]
    lines = wait_until(
        lambda: (x := [r for r in client.get(f"/v1/logs?since={since}")]) and len(x) >= RANKS and x, 10, 0.1
    )
    # step >= 1 passes at steps 1, 2, 3; hitCondition 2 keeps only the 2nd of those: step 2.
    assert sorted((r["rank"], r["message"]) for r in lines) == [
        (r, f"r{r} s2 l{r * 10 + 2}") for r in range(RANKS)
    ]
    assert not paused_pids(client, pids)


def test_snapshot_point_on_four_ranks_returns_four_rows_without_pausing(client, ranked):
    actors, pids = ranked
    sid = client.post("/v1/snapshots", {"path": JOB, "line": NEXT, "condition": "step == 1"})["id"]
    wait_until(lambda: len([w for w in client.get("/v1/snapshots") if w["id"] == sid]) == 1, 5)
    wait_until(lambda: armed_snapshot(client, sid) == RANKS, 10, message="snapshot armed on 4 workers")
    assert ray.get([a.work.remote(3) for a in actors], timeout=30) == EXPECTED
    rows = wait_until(lambda: len(x := client.get(f"/v1/snapshots/{sid}")) >= RANKS and x, 10, 0.1)
    assert sorted(r["rank"] for r in rows) == list(range(RANKS))
    for r in rows:
        top = r["frames"][0]
        assert top["line"] == NEXT and top["function"] == "one"
        assert top["locals"]["loss"] == str(r["rank"] * 10 + 1)
        assert top["locals"]["step"] == "1"
    assert not paused_pids(client, pids)


def armed_snapshot(client, sid) -> int:
    return next((s["armed"] for s in client.get("/v1/snapshots") if s["id"] == sid), 0)


async def test_session_of_a_cluster_stop_shows_the_line_and_steps(broker, client, ranked):
    actors, pids = ranked
    client.set_breakpoints(JOB, [{"line": LINE, "condition": "[rank 1] step == 2"}])
    await asyncio.to_thread(wait_until, lambda: armed(client) == 1, 10)
    ref = actors[1].work.remote(3)
    await asyncio.to_thread(wait_until, lambda: by_pid(client, pids[1])["state"] == "paused", 15)
    host, port = dap_address(broker)
    s = await open_session(host, port, {"token": broker.token, "rank": 1})
    try:
        tid, frames = await stopped_frames(s)
        assert (frames[0]["line"], frames[0]["name"]) == (LINE, "one")
        await s.request("next", {"threadId": tid})
        # the step's own stop (a second report of the breakpoint stop may still be queued)
        await s.wait_event("stopped", lambda body: body.get("reason") == "step", timeout=30)
        frames = (await s.request("stackTrace", {"threadId": tid}))["body"]["stackFrames"]
        assert frames[0]["line"] == NEXT
        await s.request("continue", {"threadId": tid})
        assert await asyncio.wait_for(ref, 30) == EXPECTED[1]
    finally:
        await s.request("disconnect", {}, check=False)
        await s.close()


def test_after_removal_nothing_pauses(client, ranked):
    actors, pids = ranked
    client.set_breakpoints(JOB, [{"line": LINE}])
    wait_until(lambda: armed(client) == RANKS, 10, message="armed on all 4")
    client.set_breakpoints(JOB, [])
    assert client.breakpoints() == []
    wait_until(
        lambda: all(by_pid(client, p)["armed"] == [] for p in pids), 10, message="every worker disarmed"
    )
    assert ray.get([a.work.remote(3) for a in actors], timeout=30) == EXPECTED
    assert not paused_pids(client, pids)


@pytest.mark.parametrize(
    "body, fragment",
    [
        ({"path": "rel.py", "breakpoints": []}, "absolute"),
        ({"path": JOB, "breakpoints": [{"line": 0}]}, "positive integer"),
        ({"path": JOB, "breakpoints": [{"line": 3, "condition": "[rank x] a"}]}, "not a list of ranks"),
        ({"path": JOB, "breakpoints": [{"line": 3, "condition": "[team 1] a"}]}, "unknown scope"),
        ({"path": JOB, "breakpoints": [{"line": 3, "condition": "step ==="}]}, "not a Python expression"),
        ({"path": JOB, "breakpoints": [{"line": 3, "hitCondition": "lots"}]}, "hitCondition"),
    ],
)
def test_bad_breakpoints_get_400_with_hint(client, body, fragment):
    with pytest.raises(SleuthError) as err:
        client.put("/v1/breakpoints", body)
    assert err.value.status == 400 and fragment in err.value.message and err.value.hint
    assert client.get("/v1/status")["version"]


def cli(broker, *args) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "raysleuth", *args, "--broker", broker.http],
        env={**os.environ, "RAYSLEUTH_TOKEN": broker.token, "RAYSLEUTH": "0"},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=str(FIXTURES),
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_cli_break_sets_a_scoped_logpoint_and_logs_prints_it_tagged(broker, client, ranked):
    actors, pids = ranked
    out = cli(
        broker,
        "break",
        f"cluster_bp.py:{NEXT}",
        "--ranks",
        "1,3",
        "--if",
        "step == 0",
        "--log",
        "loss={loss}",
    )
    assert f"cluster_bp.py:{NEXT} [rank 1,3] if step == 0 log 'loss={{loss}}'  (armed on 2: ranks 1,3)" in out
    assert "rank 1,3" in cli(broker, "break", "--list")
    assert ray.get([a.work.remote(1) for a in actors], timeout=30) == [[r * 20] for r in range(RANKS)]
    logs = wait_until(lambda: (x := cli(broker, "logs")).count("loss=") >= 2 and x, 10, 0.2)
    ours = sorted(line for line in logs.splitlines() if "loss=" in line)  # earlier tests logged too
    assert ours == ["[rank 1] loss=10", "[rank 3] loss=30"], logs
    cli(broker, "break", f"cluster_bp.py:{NEXT}", "--remove")
    assert client.breakpoints() == []


def test_pause_rank_then_continue_all(client, ranked):
    actors, pids = ranked
    ref = actors[3].spin.remote(6.0)
    wait_until(lambda: by_pid(client, pids[3])["state"] == "running", 10, message="rank 3 running spin()")
    res = client.post("/v1/pause", {"ranks": [3]})
    assert res["paused"] and not res["skipped"], res
    w = wait_until(
        lambda: (x := by_pid(client, pids[3]))["state"] == "paused" and x["paused_at"] and x,
        15,
        message="rank 3 paused",
    )
    assert w["paused_at"]["path"] == JOB and w["paused_at"]["line"] in (SPIN, SPIN - 1)
    assert paused_pids(client, pids) == {pids[3]}
    rows = client.post("/v1/evaluate", {"expression": "spins > 0", "ranks": [3]})
    assert [(r["rank"], r.get("value")) for r in rows] == [(3, "True")]
    assert client.post("/v1/continue", {})["continued"] == [w["id"]]
    assert ray.get(ref, timeout=30) > 0
    wait_until(lambda: by_pid(client, pids[3])["state"] != "paused", 10, message="rank 3 runs on")


def test_pause_of_an_idle_rank_is_pending_and_continue_all_cancels_it(client, ranked):
    """An idle actor's main thread waits in Ray's C++ task loop: the pause cannot be taken now.
    It is reported pending with why, and Continue All cancels it, so the rank's next task runs
    through instead of stopping somewhere in Ray's Python later."""
    actors, pids = ranked
    wait_until(lambda: by_pid(client, pids[2])["state"] in ("idle", "running"), 10, message="rank 2 listed")
    res = client.post("/v1/pause", {"ranks": [2]})
    assert not res["paused"] and not res["skipped"], res
    ((pending,),) = [res["pending"]]
    assert pending["worker"] == by_pid(client, pids[2])["id"] and "native code" in pending["reason"]
    res = client.post("/v1/continue", {})
    assert res["cancelled"] == [pending["worker"]], res
    assert ray.get(actors[2].work.remote(2), timeout=30) == EXPECTED[2][:2]
    assert paused_pids(client, pids) == set()


@pytest.mark.parametrize(
    "path, body",
    [
        ("/v1/evaluate", {}),
        ("/v1/evaluate", {"expression": "a ==="}),
        ("/v1/evaluate", {"expression": "1", "ranks": "0"}),
        ("/v1/pause", {"workers": "abc"}),
        ("/v1/snapshots", {"path": JOB, "line": 3, "count": 0}),
        ("/v1/snapshots", {"line": 3}),
    ],
)
def test_bad_requests_to_the_new_endpoints(client, path, body):
    with pytest.raises(SleuthError) as err:
        client.post(path, body)
    assert err.value.status == 400 and err.value.hint
