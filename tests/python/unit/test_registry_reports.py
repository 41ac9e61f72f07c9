"""The registry actor's report keeping, without Ray: the class under `@ray.remote`, driven on an
event loop of the test's own."""

from __future__ import annotations

from raysleuth.broker.workers.registry_actor import SleuthRegistry

Registry = SleuthRegistry.__ray_actor_class__

SAMPLE = {"t": 100.0, "gpus": [{"gpu": 0, "uuid": "GPU-x", "used_bytes": 5}]}


async def test_a_report_without_a_gpu_sample_keeps_the_last_heartbeats_sample():
    """A poke (rank set, state changed) reports without sampling the GPU; a worker killed right
    after must still leave its last sample in the crash record (tests/python/multinode/test_oom)."""
    reg = Registry()
    await reg.report({"id": "w1", "pid": 7, "gpu": SAMPLE})
    await reg.report({"id": "w1", "pid": 7, "rank": 3})  # a poke
    [rep] = (await reg.changes(0, 0))["reports"]
    assert rep["rank"] == 3 and rep["gpu"] == SAMPLE


async def test_a_heartbeat_that_found_no_gpu_says_so():
    reg = Registry()
    await reg.report({"id": "w1", "gpu": SAMPLE})
    await reg.report({"id": "w1", "gpu": None})  # NVML gone: the heartbeat's own answer
    [rep] = (await reg.changes(0, 0))["reports"]
    assert rep["gpu"] is None
