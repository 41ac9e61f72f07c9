"""A verl-style worker group: two role classes fused at run time into one actor class whose
methods carry a prefix (`actor_update`, `critic_value`), one actor per rank with RANK/WORLD_SIZE
set by the group. Breakpoints in the original role classes' methods stop there."""

from __future__ import annotations

import asyncio
from pathlib import Path

import fw_verl
import pytest
import ray
from helpers import dap_address, marker_line, stopped_frames, wait_until

from raysleuth.dap.client import open_session

JOB = str(Path(fw_verl.__file__).resolve())
ACTOR_LINE = marker_line(JOB, "verl-actor")
CRITIC_LINE = marker_line(JOB, "verl-critic")


@pytest.fixture
def group(ray_cluster, client):
    fused = fw_verl.create_colocated_worker_cls({"actor": fw_verl.ActorRole, "critic": fw_verl.CriticRole})
    g = fw_verl.RayWorkerGroup(fused, world_size=2)
    pids = ray.get(g.execute_all("pid"))
    wait_until(
        lambda: (
            {w["pid"]: w["rank"] for w in client.workers() if w["pid"] in pids} == {pids[0]: 0, pids[1]: 1}
        ),
        15,
        message="the group's two ranks listed",
    )
    yield g, pids
    g.kill()  # after clean_points (requested later by each test) has continued whoever is paused


def armed(client, line: int) -> int:
    return sum(b["armed"] for b in client.breakpoints() if b["line"] == line)


def paused(client, pids, line: int) -> dict[int, dict]:
    return {
        w["rank"]: w
        for w in client.workers()
        if w["pid"] in pids and w["state"] == "paused" and w["paused_at"] and w["paused_at"]["line"] == line
    }


def test_rank_scoped_breakpoint_in_a_role_method_stops_only_that_rank(client, group, clean_points):
    g, pids = group
    client.set_breakpoints(JOB, [{"line": ACTOR_LINE, "condition": "[rank 1] step == 3"}])
    wait_until(lambda: armed(client, ACTOR_LINE) >= 1, 10, message="armed in rank 1")
    refs = g.execute_all("actor_update", 3)
    assert ray.get(refs[0], timeout=30) == 6.0  # rank 0 runs through
    stopped = wait_until(lambda: paused(client, pids, ACTOR_LINE), 30, message="rank 1 paused in update")
    assert list(stopped) == [1] and stopped[1]["paused_at"]["path"] == JOB
    rows = client.post("/v1/evaluate", {"expression": "(self.rank, step, type(self).__name__)"})
    assert [(r["rank"], r["value"]) for r in rows] == [(1, "(1, 3, 'ActorRole')")]
    client.post("/v1/continue", {"ranks": [1]})
    assert ray.get(refs[1], timeout=30) == 7.0


async def test_breakpoint_in_the_other_role_stops_both_ranks_and_attach_by_rank(
    broker, client, group, clean_points
):
    g, pids = group
    client.set_breakpoints(JOB, [{"line": CRITIC_LINE}])
    await asyncio.to_thread(wait_until, lambda: armed(client, CRITIC_LINE) >= 2, 10, 0.1, "armed in both")
    refs = g.execute_all("critic_value", 5)
    await asyncio.to_thread(
        wait_until, lambda: len(paused(client, pids, CRITIC_LINE)) == 2, 30, 0.1, "both ranks paused in value"
    )
    host, port = dap_address(broker)
    s = await open_session(host, port, {"token": broker.token, "rank": 0})
    try:
        tid, frames = await stopped_frames(s)
        top = frames[0]
        assert (top["source"]["path"], top["line"], top["name"]) == (JOB, CRITIC_LINE, "value")
        got = await s.request("evaluate", {"expression": "step + self.rank", "frameId": top["id"]})
        assert got["body"]["result"] == "5"
        await s.request("continue", {"threadId": tid})
    finally:
        await s.request("disconnect", {}, check=False)
        await s.close()
    client.post("/v1/continue", {})
    assert await asyncio.wait_for(asyncio.gather(*refs), 30) == [5, 105]
