"""Head + two worker nodes (`ray.cluster_utils.Cluster`): workers on each node, distinct node ids."""

from __future__ import annotations

import pytest
from helpers import free_port, pin_ray_env, short_temp_dir, wait_until

pin_ray_env(auth_mode="disabled")

import ranked_job  # noqa: E402
import ray  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: E402

from raysleuth.broker.process import start_broker  # noqa: E402
from raysleuth.client import BrokerClient  # noqa: E402


@pytest.fixture(scope="module")
def cluster():
    temp = short_temp_dir("rs-mn-")
    c = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "include_dashboard": True,
            "node_ip_address": "127.0.0.1",
            "temp_dir": temp,
            "dashboard_port": free_port(),
        },
    )
    c.add_node(num_cpus=1, node_ip_address="127.0.0.1")
    c.add_node(num_cpus=1, node_ip_address="127.0.0.1")
    c.wait_for_nodes()
    ray.init(address=c.address, log_to_driver=False)
    yield c
    ray.shutdown()
    c.shutdown()


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
