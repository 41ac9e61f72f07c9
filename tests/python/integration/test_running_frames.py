"""A cluster breakpoint set while its loop is running already (a training loop inside one long
method): it fires at the loop's next pass, in the ranks of its scope only, without the method
being called again (on 3.11 through the running-frame tracer, on 3.12+ through sys.monitoring).
Real Ray workers, the real broker, real debugpy."""

from __future__ import annotations

import cluster_bp
import pytest
import ray
from helpers import FIXTURES, marker_line, wait_until

JOB = str(FIXTURES / "cluster_bp.py")
SPIN = marker_line(JOB, "cbp-spin")
SPIN_S = 120.0
"""The most each spin() call loops; it ends once the test's `done` file exists (the state the
test waits for), so arming and stopping inside it may take what a loaded machine needs."""


@pytest.fixture
def spinning(ray_cluster, client, tmp_path):
    client.delete("/v1/breakpoints")
    cls = ray.remote(num_cpus=0)(cluster_bp.Ranked)
    actors = [cls.remote(r, 2) for r in range(2)]
    pids = ray.get([a.pid.remote() for a in actors])
    wait_until(
        lambda: len([w for w in client.workers() if w["pid"] in pids and w["rank"] is not None]) == 2,
        timeout=15,
        message="2 ranked workers listed",
    )
    done = tmp_path / "done"
    refs = [a.spin.remote(SPIN_S, str(done)) for a in actors]
    wait_until(
        lambda: all(by_pid(client, p)["state"] == "running" for p in pids), 10, message="both inside spin()"
    )
    yield refs, pids, done
    done.touch()
    client.delete("/v1/breakpoints")
    client.post("/v1/continue", {})
    for a in actors:
        ray.kill(a)


def by_pid(client, pid):
    return next(w for w in client.workers() if w["pid"] == pid)


def test_breakpoint_in_a_running_loop_stops_its_rank_at_the_next_pass(client, spinning):
    refs, pids, done = spinning
    client.set_breakpoints(JOB, [{"line": SPIN, "condition": "[rank 1] spins > 0", "hitCondition": "1"}])
    w = wait_until(
        lambda: (x := by_pid(client, pids[1]))["state"] == "paused" and x["paused_at"] and x,
        60,
        0.05,
        "rank 1 paused inside the spin() call that was running when the point was set",
    )
    assert (w["paused_at"]["path"], w["paused_at"]["line"]) == (JOB, SPIN)
    assert by_pid(client, pids[0])["state"] != "paused"
    rows = client.post("/v1/evaluate", {"expression": "spins > 0", "ranks": [1]})
    assert [(r["rank"], r.get("value")) for r in rows] == [(1, "True")], rows
    assert client.post("/v1/continue", {"ranks": [1]})["continued"] == [w["id"]]
    done.touch()
    assert all(n > 0 for n in ray.get(refs, timeout=30))  # the one call of each finishes


def test_logpoint_in_a_running_loop_prints_without_a_new_call(client, spinning):
    refs, pids, done = spinning
    seen = client.get("/v1/logs")
    since = seen[-1]["seq"] if seen else 0
    client.set_breakpoints(
        JOB, [{"line": SPIN, "condition": "[rank 0]", "hitCondition": "<4", "logMessage": "spin {spins > 0}"}]
    )
    lines = wait_until(
        lambda: (
            (x := [r for r in client.get(f"/v1/logs?since={since}") if r["line"] == SPIN])
            and len(x) >= 3
            and x
        ),
        60,
        0.05,
        "3 logpoint lines from the running loop",
    )
    assert [(r["rank"], r["message"]) for r in lines] == [(0, "spin True")] * 3
    done.touch()
    assert all(n > 0 for n in ray.get(refs, timeout=30))
    assert not [r for r in client.get(f"/v1/logs?since={since}") if r["line"] == SPIN and r["rank"] != 0]
