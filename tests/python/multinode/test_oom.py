"""Ray's memory monitor kills a worker for the node's memory (what a CUDA host OOM or a leak does
on a real cluster): the broker records it as kind `oom`, with the worker's last heartbeat and GPU
sample. A one-node cluster of its own: its kill threshold is set just above the memory in use
when it starts, so only the test's hog crosses it. In this suite: one dedicated cluster at a time."""

from __future__ import annotations

import pytest
from helpers import live_worker_id, local_cluster, pin_ray_env, wait_until

pin_ray_env(auth_mode="disabled")

import crash_job  # noqa: E402
import ray  # noqa: E402

from raysleuth.broker.process import start_broker  # noqa: E402
from raysleuth.client import BrokerClient  # noqa: E402

HEADROOM = 1.5 * (1 << 30)
"""Bytes above the memory in use at start where Ray's memory monitor starts killing."""


def used_fraction() -> tuple[float, int]:
    """As Ray's memory monitor reads the node without a cgroup limit: (total - available) / total."""
    info = {}
    with open("/proc/meminfo") as f:
        for line in f:
            key, value = line.split(":", 1)
            info[key] = int(value.split()[0]) * 1024
    total = info["MemTotal"]
    return (total - info["MemAvailable"]) / total, total


@pytest.fixture(scope="module")
def oom_cluster():
    used, total = used_fraction()
    threshold = used + HEADROOM / total
    if threshold > 0.9:
        pytest.skip(f"this machine uses {used:.0%} of its memory already: no room for the hog")
    config = {"memory_usage_threshold": threshold, "memory_monitor_refresh_ms": 100}
    with local_cluster("rs-oom-", num_cpus=2, system_config=config) as ctx:
        yield ctx


def test_a_worker_killed_for_memory_gives_an_oom_record(oom_cluster, tmp_path):
    broker = start_broker(tmp_path / "state", address=oom_cluster.address_info["gcs_address"])
    try:
        client = BrokerClient(broker.http, broker.token)
        hog_cls = ray.remote(num_cpus=0, max_restarts=0)(crash_job.Hog)
        hog = hog_cls.options(runtime_env={"env_vars": {"RAYSLEUTH_NVML": "fake_nvml"}}).remote(300)
        pid = ray.get(hog.pid.remote(), timeout=60)
        wid = live_worker_id(client, pid, 20, agent=True, rank=300)
        with pytest.raises((ray.exceptions.OutOfMemoryError, ray.exceptions.RayActorError)) as err:
            ray.get(hog.grow.remote(8), timeout=120)
        assert "memory" in str(err.value)
        recs = wait_until(
            lambda: [c for c in client.get("/v1/crashes") if c["worker"].get("id") == wid],
            30,
            message="a record of the kill",
        )
        rec = recs[0]
        assert (rec["kind"], rec["worker"]["rank"]) == ("oom", 300), rec
        assert "memory" in rec["message"] and "memory" in rec["hint"].lower()
        full = client.get(f"/v1/crashes/{rec['id']}")
        assert full["exit_type"] == "NODE_OUT_OF_MEMORY"
        assert full["last_report"]["pid"] == pid and full["last_report"]["rank"] == 300
        assert full["gpu"]["gpus"][0]["uuid"] == "GPU-fake-0"  # the last heartbeat's sample
    finally:
        assert broker.stop() == 0
