"""verl 0.9.1's role classes on CPU (issue 38): `ActorRole` and `CriticRole` (verl_job.py) hosted
together in verl's colocated class (`create_colocated_worker_cls`: a `WorkerDict` whose methods
are `actor_update_actor` ...) and in its fused class (`create_colocated_worker_cls_fused`:
`FusedWorker_actor_critic`, every call through `_fuw_execute`), two ranks each, so the two worker
groups of the job share ranks 0-1. Each row names its group and the roles it hosts, TASK the role's
own method; `[role critic]`, `[actor ActorRole]` and `[group fused] [rank 1]` stop only what they
name; verl's tracker case (#1473/#1474), a stop in `CriticWorker.init_model` registered
`ONE_TO_ALL`, stops, by a cluster breakpoint and by a `breakpoint()` in the code."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
import verl_job
from helpers import dap_address, marker_line, stopped_frames, wait_until
from verl.single_controller.ray import (
    RayClassWithInitArgs,
    create_colocated_worker_cls,
    create_colocated_worker_cls_fused,
)

from raysleuth.dap.client import open_session

JOB = str(Path(verl_job.__file__).resolve())
ROLES = [{"name": "actor", "class_name": "ActorRole"}, {"name": "critic", "class_name": "CriticRole"}]


def role_classes() -> dict:
    return {
        "actor": RayClassWithInitArgs(cls=verl_job.ActorRole),
        "critic": RayClassWithInitArgs(cls=verl_job.CriticRole),
    }


@pytest.fixture(scope="module")
def groups(verl_groups, client):
    """{"colo": ..., "fused": ...}: each {"actor": wg, "critic": wg, "pids": [...], "ids": [...]}
    in rank order, once the broker lists both ranks of each with their roles."""
    colo = verl_groups(create_colocated_worker_cls(role_classes()), 2, "colo")
    fused = verl_groups(create_colocated_worker_cls_fused(role_classes()), 2, "fused")
    fused.fuse(role_classes().keys())
    out = {
        "colo": colo.spawn(prefix_set=role_classes().keys()),
        "fused": {"actor": fused.actor, "critic": fused.critic},
    }
    for g in out.values():
        g["pids"] = g["critic"].pid()
    for name, g in out.items():

        def listed(g=g):
            rows = {w["pid"]: w for w in client.workers() if w["pid"] in g["pids"] and w["state"] != "exited"}
            ok = len(rows) == 2 and all(w["rank"] is not None and w["roles"] == ROLES for w in rows.values())
            return ok and [rows[p] for p in g["pids"]]

        g["ids"] = [
            w["id"] for w in wait_until(listed, 30, 0.2, f"the {name} group's ranks listed with roles")
        ]
    return out


def rows(client, ids) -> list[dict]:
    by_id = {w["id"]: w for w in client.workers()}
    return [by_id[i] for i in ids]


def paused(client, ids, line: int) -> dict[int, dict]:
    return {
        w["rank"]: w
        for w in rows(client, ids)
        if w["state"] == "paused" and w["paused_at"] and w["paused_at"]["line"] == line
    }


def shown(client, wid: str) -> tuple:
    """(TASK, role) of a worker's row, once the broker read its task from Ray's task table."""
    row = wait_until(
        lambda: next((w for w in client.workers() if w["id"] == wid and w["task"]), None),
        30,
        0.2,
        "the TASK shown",
    )
    return row["task"], row["role"]


def armed_in(client, line: int) -> int:
    return sum(b["armed"] for b in client.breakpoints() if b["line"] == line)


def test_each_row_names_its_group_and_the_roles_it_hosts(broker, client, groups):
    for name, cls in (("colo", "WorkerDict"), ("fused", "FusedWorker_actor_critic")):
        got = [
            (w["rank"], w["actor_class"], w["worker_group"], w["roles"])
            for w in rows(client, groups[name]["ids"])
        ]
        assert got == [(0, cls, name, ROLES), (1, cls, name, ROLES)], got
    by_name = {g["name"]: g for g in client.get("/v1/groups")}
    for name in ("colo", "fused"):
        assert by_name[name]["ranks"] == [0, 1] and sorted(by_name[name]["workers"]) == sorted(
            groups[name]["ids"]
        )
    mine = [
        line for line in raysleuth_list(broker).splitlines() if "WorkerDict" in line or "FusedWorker" in line
    ]
    assert len(mine) == 4 and all(line.count("actor,critic (") == 1 for line in mine), mine


def raysleuth_list(broker) -> str:
    """`raysleuth list`'s output (docs/features.md, "verl", shows it: RAYSLEUTH_SHOW_LIST=1 prints it)."""
    env = {**os.environ, "RAYSLEUTH_TOKEN": broker.token, "RAYSLEUTH": "0"}
    out = subprocess.run(
        [sys.executable, "-m", "raysleuth", "list", "--broker", broker.http],
        capture_output=True, text=True, timeout=60, env=env, check=True,
    ).stdout  # fmt: skip
    if os.environ.get("RAYSLEUTH_SHOW_LIST") == "1":
        print(out)
    return out


def test_init_model_one_to_all_rank_1_breakpoint_stops_the_fused_critics_rank_1(
    client, groups, clean_points, driver
):
    """verl #1473/#1474: a stop in `CriticWorker.init_model` registered ONE_TO_ALL never came."""
    g = groups["fused"]
    line = marker_line(JOB, "verl-init-model")
    client.set_breakpoints(JOB, [{"line": line, "condition": "[group fused] [rank 1]"}])
    wait_until(lambda: armed_in(client, line) >= 1, 15, message="armed in the fused group's rank 1")
    done = driver.submit(g["critic"].init_model)
    stopped = wait_until(lambda: paused(client, g["ids"], line), 60, message="the fused rank 1 in init_model")
    assert list(stopped) == [1], stopped
    w = stopped[1]
    assert shown(client, w["id"]) == ("CriticRole.init_model", "critic") and w["worker_group"] == "fused", w
    assert [
        (r["rank"], r["value"]) for r in client.post("/v1/evaluate", {"expression": "type(self).__name__"})
    ] == [(1, "'CriticRole'")]
    client.post("/v1/continue", {})
    assert done.result(timeout=60) == [8, 9]


async def test_breakpoint_call_in_init_model_stops_both_colocated_ranks_and_attaches(
    broker, client, groups, clean_points, driver
):
    """The tracker's literal case: `breakpoint()` in `init_model` of a role in a WorkerDict."""
    g = groups["colo"]
    line = marker_line(JOB, "verl-breakpoint")
    done = driver.submit(g["critic"].init_model, True)

    def both():
        found = paused(client, g["ids"], line)
        return len(found) == 2 and found

    stopped = await asyncio.to_thread(
        wait_until, both, 60, 0.1, "both colocated ranks paused in breakpoint()"
    )
    for w in stopped.values():
        assert await asyncio.to_thread(shown, client, w["id"]) == ("CriticRole.init_model", "critic"), w
    host, port = dap_address(broker)
    for rank in (1, 0):
        s = await open_session(host, port, {"token": broker.token, "worker": stopped[rank]["id"]})
        try:
            tid, frames = await stopped_frames(s)
            user = [f for f in frames if f["source"].get("path") == JOB]
            assert user and user[0]["name"] == "init_model" and user[0]["line"] in (line, line + 1), frames[
                :4
            ]
            got = await s.request(
                "evaluate", {"expression": "width", "frameId": user[0]["id"], "context": "repl"}
            )
            assert got["body"]["result"] == str(8 + rank)
            await s.request("continue", {"threadId": tid})
        finally:
            await s.request("disconnect", {}, check=False)
            await s.close()
    assert done.result(timeout=60) == [8, 9]


def test_role_scopes_stop_only_while_that_role_runs_in_the_fused_class(client, groups, clean_points, driver):
    """`log_metrics` is run by both roles: `[role critic]` stops the critic's call only, and
    `[actor ActorRole]` (a role class inside the fused class) the actor's only."""
    g = groups["fused"]
    line = marker_line(JOB, "verl-shared")
    for scope, quiet, loud, task, role in (
        ("[role critic]", "actor", "critic", "CriticRole.compute_values", "critic"),
        ("[actor ActorRole]", "critic", "actor", "ActorRole.update_actor", "actor"),
    ):
        client.set_breakpoints(JOB, [{"line": line, "condition": scope}])
        # armed in the four workers hosting the role (both groups), not only in the fused ones
        wait_until(lambda: armed_in(client, line) >= 4, 15, message=f"{scope} armed")
        method = {"actor": "update_actor", "critic": "compute_values"}
        quiet_out = driver.submit(getattr(g[quiet], method[quiet]), 2).result(timeout=60)
        assert quiet_out in ([6.0, 7.0], [4, 104]) and not paused(client, g["ids"], line), quiet_out
        done = driver.submit(getattr(g[loud], method[loud]), 2)
        stopped = wait_until(
            lambda: len(paused(client, g["ids"], line)) == 2 and paused(client, g["ids"], line),
            60,
            message=f"both fused ranks paused by {scope}",
        )
        assert [shown(client, stopped[r]["id"]) for r in (0, 1)] == [(task, role)] * 2, stopped
        client.post("/v1/continue", {})
        done.result(timeout=60)
        client.delete("/v1/breakpoints")


def test_group_fused_rank_1_stops_the_fused_critics_rank_1_not_the_colocated_one(
    broker, client, groups, clean_points, driver
):
    line = marker_line(JOB, "verl-critic")
    res = client.set_breakpoints(JOB, [{"line": line, "condition": "[group fused] [rank 1]"}])
    assert res["breakpoints"][0]["scope"] == "rank 1; group fused", res
    wait_until(lambda: armed_in(client, line) >= 1, 15, message="armed in the fused group's rank 1")
    # The colocated group's rank 1 runs the same line: it does not stop.
    assert driver.submit(groups["colo"]["critic"].compute_values, 5).result(timeout=60) == [10, 110]
    assert not paused(client, groups["colo"]["ids"], line)
    done = driver.submit(groups["fused"]["critic"].compute_values, 5)
    stopped = wait_until(
        lambda: paused(client, groups["fused"]["ids"], line), 60, message="fused rank 1 paused"
    )
    assert list(stopped) == [1], stopped
    assert shown(client, stopped[1]["id"]) == ("CriticRole.compute_values", "critic")
    [row] = [
        line for line in raysleuth_list(broker).splitlines() if "fusedFusedWorker_actor_critic_0:1" in line
    ]
    assert "CriticRole.compute_values" in row and f"paused at {JOB}:{line}" in row, row
    client.post("/v1/continue", {})
    assert done.result(timeout=60) == [10, 110]
