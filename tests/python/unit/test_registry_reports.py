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


async def test_emitted_gives_the_items_after_since_and_counts_what_the_ring_dropped():
    reg = Registry()
    ring = reg._emitted.maxlen
    for n in range(ring + 5):  # the ring keeps the last `ring`: seqs 6 .. ring + 5
        await reg.emit("w1", "log", {"n": n, "text": f"line {n}"})
    last = ring + 5
    got = await reg.emitted(last - 3, 0)
    assert got["seq"] == last and got["lost"] == 0
    assert [x["seq"] for x in got["items"]] == [last - 2, last - 1, last]
    assert [x["data"]["text"] for x in got["items"]] == [f"line {n}" for n in (ring + 2, ring + 3, ring + 4)]
    old = await reg.emitted(0, 0)  # seqs 1-5 fell out of the ring
    assert old["lost"] == 5 and len(old["items"]) == ring and old["items"][0]["seq"] == 6
    assert (await reg.emitted(-1, 0))["lost"] == 0  # a first poll: nothing counted lost
    assert (await reg.emitted(last, 0))["items"] == [] and (await reg.emitted(last + 7, 0))["items"] == []
