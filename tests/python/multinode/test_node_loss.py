"""Faults of a cluster's parts, each with a bound: Ray's dashboard (the State API) down for 30 s,
and a node removed while one of its workers is paused with a DAP session attached.

A head (with the dashboard) and one worker node (`ray.cluster_utils.Cluster`), and one real
broker, for this module. The dashboard is killed and started again through the head's own
`ray._private.node.Node` (what `ray start` runs), so the outage is Ray's dashboard really gone."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest
from helpers import (
    FIXTURES,
    local_multinode,
    marker_line,
    pin_ray_env,
    wait_until,
)

pin_ray_env(auth_mode="disabled")

import psutil  # noqa: E402
import ranked_job  # noqa: E402
import ray  # noqa: E402
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: E402

from raysleuth.broker.process import start_broker  # noqa: E402
from raysleuth.broker.workers.snapshot import STALE_AFTER_S  # noqa: E402
from raysleuth.client import BrokerClient  # noqa: E402
from raysleuth.dap.client import ChannelClosed, open_session  # noqa: E402

JOB = str(FIXTURES / "ranked_job.py")
STEP_LINE = marker_line(JOB, "step-loop")
OUTAGE_S = 30.0


@pytest.fixture(scope="module")
def cluster():
    with local_multinode("rs-nl-", extra_nodes=1) as c:
        yield c


@pytest.fixture(scope="module")
def broker(cluster, tmp_path_factory):
    b = start_broker(tmp_path_factory.mktemp("state"), address=cluster.address)
    yield b
    assert b.stop() == 0


@pytest.fixture(scope="module")
def client(broker):
    return BrokerClient(broker.http, broker.token)


def on_node(node_id: str, rank: int):
    cls = ray.remote(num_cpus=0, max_restarts=0)(ranked_job.RankedTrainer)
    strategy = NodeAffinitySchedulingStrategy(node_id, soft=False)
    return cls.options(scheduling_strategy=strategy).remote(rank, 2)


def listed(client, pid: int) -> dict | None:
    return next((w for w in client.workers() if w["pid"] == pid), None)


def wait_listed_with_agent(client, pids: list[int]) -> None:
    wait_until(
        lambda: all((w := listed(client, p)) and w["agent"] and w["rank"] is not None for p in pids),
        20,
        message=f"the agents of {pids} reported",
    )


async def ended(session, timeout: float) -> dict:
    """The session's `terminated` or `exited` event, or {"event": "closed"} if it closed first."""
    deadline = time.monotonic() + timeout
    while True:
        for ev in session.events:
            if ev.get("event") in ("terminated", "exited"):
                return ev
        if session.closed.is_set():
            return {"event": "closed", "reason": session.close_reason}
        if time.monotonic() > deadline:
            raise AssertionError(f"no end of the session in {timeout} s; events: {session.events}")
        await asyncio.sleep(0.1)


def test_dashboard_down_for_30_s_degrades_says_so_and_recovers(cluster, broker, client):
    head = cluster.head_node
    stays, victim = on_node(head.node_id, 300), on_node(head.node_id, 301)
    stays_pid, victim_pid = ray.get([stays.pid.remote(), victim.pid.remote()], timeout=60)
    wait_listed_with_agent(client, [stays_pid, victim_pid])
    victim_id = listed(client, victim_pid)["id"]
    wait_until(
        lambda: client.get("/v1/status")["state_api"]["ok"] and listed(client, stays_pid)["actor_class"],
        20,
        message="the State API answering",
    )
    assert client.get("/v1/status")["degraded"] == []

    head.kill_dashboard()
    down_at = time.monotonic()
    status = wait_until(
        lambda: (s := client.get("/v1/status"))["degraded"] and s,
        15,
        message="the broker to say what is down",
    )
    [down] = status["degraded"]
    assert down["part"] == "state_api" and not status["state_api"]["ok"] and down["error"] and down["since"]
    assert "dashboard" in down["hint"] and "agents report" in down["hint"], down["hint"]

    # Degraded, not blind: a worker killed during the outage is seen to go by its silent agent,
    # while the other stays listed as its agent reports.
    os.kill(victim_pid, signal.SIGKILL)
    gone = wait_until(
        lambda: (w := listed(client, victim_pid)) and w["state"] == "exited" and w,
        STALE_AFTER_S + 10,
        0.5,
        "the killed worker to turn exited with the dashboard down",
    )
    assert gone["rank"] == 301
    assert time.monotonic() - down_at < OUTAGE_S, "the outage must still be on for what follows"
    # The rest of the 30 s: every second, the broker answers and keeps the live worker.
    while time.monotonic() - down_at < OUTAGE_S:
        w = listed(client, stays_pid)
        assert w is not None and w["state"] in ("running", "idle") and w["rank"] == 300, w
        assert client.get("/v1/status")["degraded"], "the outage went unreported"
        time.sleep(1.0)

    head.start_api_server(include_dashboard=True, raise_on_failure=True)
    up = wait_until(
        lambda: (s := client.get("/v1/status"))["degraded"] == [] and s["state_api"]["ok"] and s,
        60,
        0.5,
        "the broker to recover by itself",
    )
    assert up["state_api"]["error"] is None
    # Nothing lost: the death during the outage gets its record once Ray can say how it ended.
    rec = wait_until(
        lambda: [c for c in client.get("/v1/crashes") if (c.get("worker") or {}).get("id") == victim_id],
        30,
        0.5,
        "the record of the worker killed during the outage",
    )[0]
    assert rec["kind"] == "worker_died" and rec["worker"]["rank"] == 301
    assert listed(client, stays_pid)["actor_class"] == "RankedTrainer"
    ray.kill(stays)


async def test_node_removed_while_its_worker_is_paused_and_attached(cluster, broker, client):
    from helpers import dap_address

    head = cluster.head_node
    [other] = list(cluster.worker_nodes)
    lost, kept = on_node(other.node_id, 310), on_node(head.node_id, 311)
    lost_pid, kept_pid = await asyncio.gather(lost.pid.remote(), kept.pid.remote())
    await asyncio.to_thread(wait_listed_with_agent, client, [lost_pid, kept_pid])
    ids = {p: listed(client, p)["id"] for p in (lost_pid, kept_pid)}
    client.put("/v1/breakpoints", {"path": JOB, "breakpoints": [{"line": STEP_LINE, "ranks": [310, 311]}]})
    host, port = dap_address(broker)
    s_lost = s_kept = None
    try:
        await asyncio.to_thread(
            wait_until,
            lambda: any(b["line"] == STEP_LINE and b["armed"] >= 2 for b in client.get("/v1/breakpoints")),
            15,
            message="the cluster breakpoint armed on both",
        )
        s_lost = await open_session(host, port, {"token": broker.token, "worker": ids[lost_pid]})
        s_kept = await open_session(host, port, {"token": broker.token, "worker": ids[kept_pid]})
        lost_ref, kept_ref = lost.step.remote(3), kept.step.remote(4)
        await s_lost.wait_event("stopped", timeout=60)
        stopped = await s_kept.wait_event("stopped", timeout=60)

        cluster.remove_node(other)
        removed_at = time.monotonic()
        # The session on the lost worker ends with an event, not silence.
        end = await ended(s_lost, 30)
        assert end["event"] == "terminated", end
        said = [e["body"]["output"] for e in s_lost.events if e["event"] == "output"]
        assert any("ended" in o for o in said), said
        ended_after = time.monotonic() - removed_at
        assert ended_after < 30
        # A request on it now fails at once with a message, or finds the connection closed.
        try:
            resp = await s_lost.request("stackTrace", {"threadId": 1}, timeout=5, check=False)
            assert not resp["success"] and resp.get("message"), resp
        except ChannelClosed:
            pass

        # The broker marks the worker gone, and its HTTP API answers.
        gone = await asyncio.to_thread(
            wait_until,
            lambda: (w := listed(client, lost_pid)) and w["state"] in ("exited", "crashed") and w,
            60,
            0.5,
            "the lost worker marked gone",
        )
        assert gone["rank"] == 310 and gone["paused_at"] is None
        rec = await asyncio.to_thread(
            wait_until,
            lambda: [
                c for c in client.get("/v1/crashes") if (c.get("worker") or {}).get("id") == ids[lost_pid]
            ],
            30,
            0.5,
            "the record of the worker lost with its node",
        )
        full = client.get(f"/v1/crashes/{rec[0]['id']}")
        assert full["kind"] == "worker_died" and full["exit_type"] == "NODE_DIED", full["exit_type"]
        assert "node" in full["hint"] and full["last_report"]["state"] == "paused"
        nodes = {n["node_id"]: n for n in client.nodes()}
        assert nodes[head.node_id]["alive"]
        assert client.get("/v1/status")["links"] >= 1

        # It serves the other worker as before: stack, evaluate, continue to the end.
        frames = (await s_kept.request("stackTrace", {"threadId": stopped["body"]["threadId"]}))["body"]
        top = frames["stackFrames"][0]
        assert (top["source"]["path"], top["line"]) == (JOB, STEP_LINE)
        got = await s_kept.request(
            "evaluate", {"expression": "step", "frameId": top["id"], "context": "repl"}
        )
        assert got["body"]["result"] == "4"
        client.put("/v1/breakpoints", {"path": JOB, "breakpoints": []})
        await s_kept.request("disconnect", {})
        assert await asyncio.wait_for(kept_ref, 60) == sum(i * 4 for i in range(1000))
        with pytest.raises(ray.exceptions.RayActorError):
            await asyncio.wait_for(lost_ref, 60)
        # And the lost worker's process did not outlive its node.
        await asyncio.to_thread(
            wait_until, lambda: not psutil.pid_exists(lost_pid), 30, 0.5, "the lost worker's process ended"
        )
    finally:
        client.put("/v1/breakpoints", {"path": JOB, "breakpoints": []})
        for s in (s_lost, s_kept):
            if s is not None:
                await s.close()
        if psutil.pid_exists(lost_pid):
            os.kill(lost_pid, signal.SIGKILL)  # ours: started by this test on the removed node
        ray.kill(kept)
