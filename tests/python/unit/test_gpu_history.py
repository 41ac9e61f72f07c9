"""The broker's GPU memory history: samples per worker, peak, the "growing" flag, the API rows."""

from __future__ import annotations

from raysleuth.broker.telemetry.gpu import MIN_GROWTH, WINDOW, GpuHistory
from raysleuth.broker.workers.registry_actor import _without_times

MIB = 1 << 20


def sample(t: float, *used_mib: int, **extra) -> dict:
    gpus = [
        {"gpu": i, "uuid": f"GPU-{i}", "used_bytes": u * MIB, "device_used_bytes": 0, "total_bytes": 1}
        for i, u in enumerate(used_mib)
    ]
    return {"t": t, "gpus": gpus, **extra}


def test_peak_is_over_all_gpus_of_the_worker_and_stays_after_a_release():
    h = GpuHistory()
    assert h.add("w1", 0, sample(1, 100, 50))
    assert h.add("w1", 0, sample(2, 300, 50))
    assert h.add("w1", 0, sample(3, 10, 10))
    row = h.row("w1")
    assert row["peak_bytes"] == 350 * MIB and row["rank"] == 0
    firsts = [(s["t"], s["gpu"], s["used_bytes"]) for s in row["samples"]][:2]
    assert firsts == [(1, 0, 100 * MIB), (1, 1, 50 * MIB)]
    assert len(row["samples"]) == 6
    assert h.summary("w1") == {"used_bytes": 20 * MIB, "peak_bytes": 350 * MIB, "growing": False}
    assert h.summary("nobody") is None


def test_a_sample_is_taken_once_and_bad_ones_not_at_all():
    h = GpuHistory()
    assert h.add("w1", 0, sample(5, 100))
    assert not h.add("w1", 0, sample(5, 200))  # the same heartbeat's sample, seen again
    assert not h.add("w1", 0, sample(4, 200))
    assert not h.add("w1", 0, None) and not h.add("w1", 0, {"gpus": []}) and not h.add("", 0, sample(9, 1))
    assert h.row("w1")["peak_bytes"] == 100 * MIB


def test_growing_needs_a_window_that_never_falls_and_rises_enough():
    step = MIN_GROWTH // MIB // (WINDOW - 1) + 1
    h = GpuHistory()
    for i in range(WINDOW - 1):
        h.add("w1", 1, sample(i, 1000 + i * step))
    assert not h.growing("w1"), "too few samples"
    h.add("w1", 1, sample(WINDOW, 1000 + (WINDOW - 1) * step))
    assert h.growing("w1")
    h.add("w1", 1, sample(WINDOW + 1, 900))
    assert not h.growing("w1"), "it fell"
    flat = GpuHistory()
    for i in range(WINDOW + 3):
        flat.add("w2", 0, sample(i, 4000 + i))  # a few bytes of noise up
    assert not flat.growing("w2")


def test_rows_are_the_workers_with_gpu_samples_by_rank_and_the_ring_is_bounded():
    h = GpuHistory(keep=3)
    h.add("b", 2, sample(1, 1))
    h.add("a", None, sample(1, 1))
    h.add("c", 0, sample(1, 1))
    h.add("nogpu", 1, {"t": 1, "gpus": []})
    for t in range(2, 10):
        h.add("c", 0, sample(t, t))
    rows = h.rows()
    assert [r["worker"] for r in rows] == ["c", "b", "a"]
    assert [s["t"] for s in rows[0]["samples"]] == [7, 8, 9]
    assert rows[0]["peak_bytes"] == 9 * MIB


def test_a_heartbeat_is_news_when_the_gpu_memory_moved_64_mib():
    base = {"id": "w1", "state": "running", "time": 1, "gpu": sample(1, 1000)}
    assert _without_times(base) == _without_times(dict(base, time=2, gpu=sample(2, 1010)))
    assert _without_times(base) != _without_times(dict(base, gpu=sample(3, 1100)))
    assert _without_times(dict(base, gpu=None)) == _without_times(dict(base, gpu=None, time=5))
