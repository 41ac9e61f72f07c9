"""GPU memory per worker through the real agent, registry and broker: NVML is the seam (a fake
module on this machine without a GPU), everything behind it is real."""

from __future__ import annotations

import gpu_job
import ray
from helpers import wait_until

GIB = 1 << 30
MIB = 1 << 20


def test_gpu_memory_per_worker_over_time_with_peak_and_growing(client):
    env = {"RAYSLEUTH_NVML": "fake_nvml", "RAYSLEUTH_HEARTBEAT_S": "0.3"}
    a = ray.remote(num_cpus=0)(gpu_job.GpuUser).options(runtime_env={"env_vars": env}).remote(400)
    try:
        pid = ray.get(a.pid.remote(), timeout=30)
        wid = wait_until(
            lambda: next((w["id"] for w in client.workers() if w["pid"] == pid and w["rank"] == 400), None),
            15,
            message="the worker listed with its rank",
        )

        def row():
            return next((r for r in client.get("/v1/gpu") if r["worker"] == wid), None)

        # the row's rank is the one of its latest sample: the first may come before __init__ set it
        first = wait_until(lambda: (r := row()) is not None and r["rank"] == 400 and r, 15, message="GPU row")
        last = first["samples"][-1]
        assert (first["rank"], last["gpu"], last["uuid"]) == (400, 0, "GPU-fake-0")
        assert last["used_bytes"] == 3 * GIB
        assert last["device_used_bytes"] == 5 * GIB and last["total_bytes"] == 80 * GIB
        assert not first["growing"]
        used = 3 * GIB
        for _ in range(5):  # a leak: 512 MiB more at every step, never freed
            used = ray.get(a.hold_more.remote(512), timeout=30)
            wait_until(
                lambda u=used: (r := row()) is not None and r["samples"][-1]["used_bytes"] == u,
                15,
                message=f"a sample of {used} bytes",
            )
        grown = row()
        assert grown["growing"], [s["used_bytes"] // MIB for s in grown["samples"]]
        assert grown["peak_bytes"] == 3 * GIB + 5 * 512 * MIB
        listed = client.get(f"/v1/workers/{wid}")["gpu_memory"]
        assert listed == {"used_bytes": used, "peak_bytes": used, "growing": True}
        # The growth is a memory case naming the rank (issue 26): one, for this episode.
        cases = [c for c in client.get("/v1/cases") if c["kind"] == "memory" and c["ranks"] == [400]]
        assert len(cases) == 1 and "rank 400: GPU memory grew" in cases[0]["summary"], cases
        evidence = client.get(f"/v1/cases/{cases[0]['id']}")["evidence"]
        grew = [s["used_bytes"] for s in evidence["samples"]]  # as it was when the growth began
        assert evidence["reason"] == "growing" and grew[-1] - grew[0] >= 256 * MIB and grew == sorted(grew)
        ray.get(a.hold_more.remote(-2048), timeout=30)  # freed: not growing, the peak stays
        freed = wait_until(
            lambda: (r := row()) is not None and not r["growing"] and r,
            15,
            message="growing to end once memory is freed",
        )
        assert freed["peak_bytes"] == grown["peak_bytes"]
        assert freed["samples"][-1]["used_bytes"] == 3 * GIB + 512 * MIB
    finally:
        ray.kill(a)
