"""Head + two worker nodes (`ray.cluster_utils.Cluster`): workers on each node, distinct node ids."""

from __future__ import annotations

import pytest
from helpers import (
    local_multinode,
    pin_ray_env,
    wait_until,
)

pin_ray_env(auth_mode="disabled")

import ranked_job  # noqa: E402
import ray  # noqa: E402
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: E402

from raysleuth.broker.process import start_broker  # noqa: E402
from raysleuth.client import BrokerClient  # noqa: E402


@pytest.fixture(scope="module")
def cluster():
    with local_multinode("rs-mn-", extra_nodes=2) as c:
        yield c


def test_workers_on_three_nodes_have_distinct_node_ids(cluster, tmp_path):
    broker = start_broker(tmp_path / "state", address=cluster.address)
    try:
        client = BrokerClient(broker.http, broker.token)
        node_ids = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
        assert len(node_ids) == 3
        cls = ray.remote(num_cpus=1)(ranked_job.RankedTrainer)
        actors = [
            cls.options(scheduling_strategy=NodeAffinitySchedulingStrategy(nid, soft=False)).remote(rank, 3)
            for rank, nid in enumerate(node_ids)
        ]
        pids = ray.get([a.pid.remote() for a in actors])

        def ranked():
            ws = [
                w
                for w in client.workers()
                if w["pid"] in pids and w["rank"] is not None and w["state"] != "exited"
            ]
            return {w["rank"]: w for w in ws} if len(ws) == 3 else None

        ws = wait_until(ranked, timeout=15, message="3 ranked workers, one per node")
        assert [ws[r]["node_id"] for r in range(3)] == node_ids
        nodes = wait_until(
            lambda: (
                [n for n in client.nodes() if n["workers"] >= 1]
                if len([n for n in client.nodes() if n["workers"] >= 1]) == 3
                else None
            ),
            timeout=10,
            message="3 nodes each with a worker",
        )
        assert {n["node_id"] for n in nodes} == set(node_ids) and all(n["alive"] for n in nodes)
        assert sum(n["head"] for n in client.nodes()) == 1
        for a in actors:
            ray.kill(a)
    finally:
        assert broker.stop() == 0


def test_attach_by_id_and_by_rank_to_actors_on_two_other_nodes(cluster, tmp_path):
    import asyncio

    from helpers import FIXTURES, dap_address, marker_line

    from raysleuth.dap.client import open_session

    job = str(FIXTURES / "ranked_job.py")
    line = marker_line(job, "step-loop")
    broker = start_broker(tmp_path / "state", address=cluster.address)
    try:
        client = BrokerClient(broker.http, broker.token)
        head = ray.get_runtime_context().get_node_id()
        others = [n["NodeID"] for n in ray.nodes() if n["Alive"] and n["NodeID"] != head]
        cls = ray.remote(num_cpus=1)(ranked_job.RankedTrainer)
        actors = [
            cls.options(scheduling_strategy=NodeAffinitySchedulingStrategy(nid, soft=False)).remote(10 + i, 2)
            for i, nid in enumerate(others)
        ]
        pids = ray.get([a.pid.remote() for a in actors])
        ws = wait_until(
            lambda: (
                {w["rank"]: w for w in client.workers() if w["pid"] in pids and w["rank"] is not None}
                if len([w for w in client.workers() if w["pid"] in pids and w["rank"] is not None]) == 2
                else None
            ),
            timeout=15,
            message="two ranked workers on the two non-head nodes",
        )
        assert [ws[10]["node_id"], ws[11]["node_id"]] == others
        host, port = dap_address(broker)

        async def session_stops(attach, actor, step):
            s = await open_session(
                host, port, dict(attach, token=broker.token), breakpoints={job: [{"line": line}]}
            )
            try:
                ref = actor.step.remote(step)
                ev = await s.wait_event("stopped", timeout=60)
                frames = (await s.request("stackTrace", {"threadId": ev["body"]["threadId"]}))["body"]
                top = frames["stackFrames"][0]
                got = await s.request(
                    "evaluate", {"expression": "step", "frameId": top["id"], "context": "repl"}
                )
                await s.request("disconnect", {})
                assert await asyncio.wait_for(ref, 60) == sum(i * step for i in range(1000))
                return top["line"], got["body"]["result"]
            finally:
                await s.close()

        async def both():
            return await asyncio.gather(
                session_stops({"worker": ws[10]["id"]}, actors[0], 4),
                session_stops({"rank": 11}, actors[1], 5),
            )

        assert asyncio.run(both()) == [(line, "4"), (line, "5")]
        for a in actors:
            ray.kill(a)
    finally:
        assert broker.stop() == 0
