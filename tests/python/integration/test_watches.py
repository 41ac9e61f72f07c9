"""First-divergence watches through real workers, the real agent and the real broker (issue 26):
four ranks pass a line once per step; rank 2's gradient drifts by 1e-3 from pass 7 (passes count
from 1, steps from 0: step 6)."""

from __future__ import annotations

import pytest
import ray
import watch_job
from helpers import FIXTURES, marker_line, wait_until

JOB = str(FIXTURES / "watch_job.py")
LINE = marker_line(JOB, "watch-line")
RANKS = 4
DRIFT_STEP = 6
"""The drifting rank's first different step: its 7th pass."""


@pytest.fixture
def trainers(ray_cluster, client):
    made = []

    def make(drifter: int):
        cls = ray.remote(num_cpus=0)(watch_job.Trainer)
        actors = [cls.remote(r, RANKS, drifter, DRIFT_STEP) for r in range(RANKS)]
        pids = ray.get([a.pid.remote() for a in actors], timeout=60)
        wait_until(
            lambda: len([w for w in client.workers() if w["pid"] in pids and w["rank"] is not None]) == RANKS,
            30,
            message="4 ranked trainers listed",
        )
        made.extend(actors)
        return actors, pids

    yield make
    client.post("/v1/continue", {})
    client.delete("/v1/breakpoints")
    for a in made:
        ray.kill(a)


def armed_on_all(client, wid, pids) -> bool:
    return all(wid in next((w["armed"] for w in client.workers() if w["pid"] == p), []) for p in pids)


def run_steps(actors, steps: int) -> None:
    for s in range(steps):
        ray.get([a.step.remote(s) for a in actors], timeout=60)


def test_the_watch_names_rank_2_at_pass_7_and_pass_6_as_the_last_agreement(client, trainers):
    actors, pids = trainers(drifter=2)
    wid = client.post("/v1/watches", {"path": JOB, "line": LINE, "expressions": ["grad"]})["id"]
    wait_until(lambda: armed_on_all(client, wid, pids), 15, message="the watch armed on the four ranks")
    run_steps(actors, 10)  # steps 0-9: passes 1-10; rank 2 drifts from step 6, its pass 7
    got = wait_until(
        lambda: (w := client.get(f"/v1/watches/{wid}"))["divergence"] and w, 15, message="a divergence"
    )
    div = got["divergence"]
    assert (div["pass"], div["ranks"], div["expression"]) == (7, [2], "grad"), got
    case = client.get(f"/v1/cases/{div['case']}")
    assert case["kind"] == "divergence" and case["ranks"] == [2]
    assert case["evidence"]["last_agreed_pass"] == 6 and case["summary"].startswith(
        "rank 2 diverged from 0-1,3 at pass 7"
    )
    run_steps(actors, 2)  # passes 11-12 come after the divergence: still the one case
    wait_until(lambda: client.get(f"/v1/watches/{wid}")["passes"] >= 12, 15, message="12 passes")
    filed = [
        c["id"]
        for c in client.get("/v1/cases")
        if c["kind"] == "divergence" and client.get(f"/v1/cases/{c['id']}")["evidence"]["watch"] == wid
    ]
    assert filed == [div["case"]]
    client.delete(f"/v1/watches/{wid}")


def test_ranks_that_agree_file_no_case_and_with_stop_a_divergence_stops_the_ranks(client, trainers):
    actors, pids = trainers(drifter=-1)
    wid = client.post("/v1/watches", {"path": JOB, "line": LINE, "expressions": ["grad"], "stop": True})["id"]
    wait_until(lambda: armed_on_all(client, wid, pids), 15, message="the watch armed on the four ranks")
    run_steps(actors, 6)
    done = wait_until(
        lambda: (w := client.get(f"/v1/watches/{wid}"))["passes"] >= 6 and w, 15, message="6 passes"
    )
    assert done["divergence"] is None and done["compared"] >= 6
    assert not [c for c in client.get("/v1/cases") if c["kind"] == "divergence" and wid in str(c)]
    # From here rank 3 drifts: the next pass differs, then the ranks stop at the line.
    ray.get([a.drift.remote(3, 0) for a in actors], timeout=30)
    refs = [a.step.remote(6) for a in actors]
    ray.get(refs, timeout=60)
    wait_until(lambda: client.get(f"/v1/watches/{wid}")["divergence"], 15, message="the divergence of rank 3")
    # The stop is a one-shot breakpoint at the line: each rank stops the next time it gets there,
    # once the breakpoint reached it.
    wait_until(
        lambda: sum(b["armed"] for b in client.breakpoints() if b.get("owner") == f"watch:{wid}") == RANKS,
        30,
        message="the watch's stop armed on the four ranks",
    )
    more = [a.step.remote(7) for a in actors]
    wait_until(
        lambda: (
            {w["rank"] for w in client.workers() if w["pid"] in pids and w["state"] == "paused"}
            == {0, 1, 2, 3}
        ),
        30,
        message="the four ranks stopped at the line",
    )
    assert all(w["paused_at"]["line"] == LINE for w in client.workers() if w["pid"] in pids)
    client.post("/v1/continue", {})
    ray.get(more, timeout=60)
    client.delete(f"/v1/watches/{wid}")
