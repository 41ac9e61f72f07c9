"""verl worker groups on a real cluster (issue 38): two groups of one job, both with ranks 0..1,
made of plain Ray actors named and configured the way verl 0.9.1 makes them
(tests/fixtures/verl_named.py). Each worker row names its group; each group is a rank group of
`GET /v1/groups`; `[group critic] [rank 1]` stops the critic's rank 1 only, not the actor's."""

from __future__ import annotations

import pytest
import ray
import verl_named
from helpers import FIXTURES, marker_line, wait_until

JOB = str(FIXTURES / "verl_named.py")
LINE = marker_line(JOB, "vn-line")


@pytest.fixture
def two_groups(ray_cluster, client):
    client.delete("/v1/breakpoints")
    actors = verl_named.make_group(ray, verl_named.ActorWorker, "actor", 2)
    critics = verl_named.make_group(ray, verl_named.CriticWorker, "critic", 2)
    pids = ray.get([a.pid.remote() for a in actors + critics], timeout=60)

    def listed():
        rows = [w for w in client.workers() if w["pid"] in pids and w["state"] != "exited"]
        return len(rows) == 4 and all(w["rank"] is not None and w["worker_group"] for w in rows) and rows

    rows = wait_until(listed, 30, 0.2, "the 4 workers listed with ranks and groups")
    yield actors, critics, pids, rows
    client.delete("/v1/breakpoints")
    client.post("/v1/continue", {})
    for a in actors + critics:
        ray.kill(a)


def test_group_critic_rank_1_stops_only_the_critics_rank_1(client, two_groups):
    actors, critics, pids, rows = two_groups
    by_pid = {w["pid"]: w for w in rows}
    assert [(by_pid[p]["worker_group"], by_pid[p]["rank"]) for p in pids] == [
        ("actor", 0), ("actor", 1), ("critic", 0), ("critic", 1),
    ]  # fmt: skip
    assert by_pid[pids[3]]["actor_name"] == "criticCriticWorker_0:1" and by_pid[pids[3]]["roles"] == []
    groups = {g["name"]: g for g in client.get("/v1/groups")}
    assert groups["critic"]["ranks"] == [0, 1] and groups["critic"]["worker_group"] == "critic"
    assert sorted(groups["critic"]["workers"]) == sorted(by_pid[p]["id"] for p in pids[2:])
    assert sorted(groups["actor"]["workers"]) == sorted(by_pid[p]["id"] for p in pids[:2])

    res = client.set_breakpoints(JOB, [{"line": LINE, "condition": "[group critic] [rank 1]"}])
    assert res["breakpoints"][0]["scope"] == "rank 1; group critic"
    wait_until(
        lambda: [b["armed"] for b in client.breakpoints() if b["line"] == LINE] == [1],
        15,
        0.2,
        "armed in the critic's rank 1 only",
    )
    refs = [w.work.remote(5) for w in actors + critics]
    assert ray.get(refs[:3], timeout=60) == [5, 15, 5]  # the actor's rank 1 passed the line
    paused = wait_until(
        lambda: [w for w in client.workers() if w["pid"] in pids and w["state"] == "paused"] or None,
        20,
        0.2,
        "the critic's rank 1 paused",
    )
    assert [(w["pid"], w["worker_group"], w["rank"]) for w in paused] == [(pids[3], "critic", 1)]
    assert paused[0]["paused_at"]["line"] == LINE
    client.post("/v1/continue", {"workers": [paused[0]["id"]]})
    assert ray.get(refs[3], timeout=60) == 15
