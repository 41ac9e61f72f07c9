"""Cases (issue 26): a crash record and a suspected hang become one line that names the rank, the
step and the line; the case book keeps them newest first, tells the stream, and knows the crash
records filed before it started."""

from __future__ import annotations

import asyncio

import pytest

from raysleuth.broker.cases.book import CaseBook
from raysleuth.broker.events import EventHub
from raysleuth.broker.postmortem.crashes import CrashStore
from raysleuth.cli.cases import format_detail, format_list
from raysleuth.model.case import crash_case, hang_case, step_of
from raysleuth.model.crash import CrashRecord
from raysleuth.shared.errors import NotFound

RAY = "/venv/lib/python3.11/site-packages/ray/_private/worker.py"
TORCH = "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"


def demo_crash(**over) -> CrashRecord:
    rec = {
        "id": "20261206-010203-abcdef12",
        "time": 1_800_000_000.0,
        "kind": "exception",
        "exc_type": "builtins.FloatingPointError",
        "message": "loss diverged on rank 2 at step 40: 8.56e+35",
        "hint": "Look at the values that led here.",
        "worker": {"id": "w2", "rank": 2, "job_id": "01000000", "actor_class": "Trainer", "pid": 42},
        "frames": [
            {
                "path": "/home/u/demo.py",
                "line": 69,
                "function": "step",
                "locals": {"step": "40", "loss": "8.5e35"},
            },
            {"path": RAY, "line": 900, "function": "main_loop", "locals": {}},
        ],
    }
    return CrashRecord.from_json(rec | over)


def test_a_crash_case_names_rank_error_line_and_step():
    case = crash_case(demo_crash())
    assert case.id == "crash-20261206-010203-abcdef12" and case.kind == "crash"
    head = "rank 2 raised FloatingPointError at demo.py:69 in step, step 40"
    assert case.summary == f"{head}: loss diverged on rank 2 at step 40: 8.56e+35"
    assert (
        case.ranks == [2] and case.job_id == "01000000" and case.hint == "Look at the values that led here."
    )
    assert case.to_json()["evidence"] == {"crash": "20261206-010203-abcdef12", "step": 40}


def test_the_step_comes_from_the_newest_step_event_when_no_frame_has_one():
    rec = demo_crash(frames=[{"path": "/home/u/job.py", "line": 3, "function": "f", "locals": {}}])
    rec.events = [{"name": "step", "fields": {"step": 7}}, {"name": "step", "fields": {"step": 8}}]
    assert step_of(rec) == 8
    rec.events = []
    assert step_of(rec) is None and ", step" not in crash_case(rec).summary


def test_a_hard_death_without_frames_or_rank_says_who_it_was():
    rec = demo_crash(kind="worker_died", exc_type=None, message="SIGKILL", frames=[])
    rec.worker = {"id": "w9", "pid": 99, "task": "prefetch_batch"}
    case = crash_case(rec)
    assert case.summary == "prefetch_batch (pid 99) died: worker_died: SIGKILL" and case.ranks == []


def hang(behind: list[dict]) -> dict:
    frames = [
        {"path": TORCH, "line": 2801, "function": "all_reduce"},
        {"path": "/home/u/train.py", "line": 88, "function": "train_step"},
    ]
    return {
        "job_id": "02000000",
        "ranks_text": "0-3",
        "since": 1_800_000_000.0,
        "samples": 3,
        "behind": behind,
        "text": "job 02000000 ...",
        "stacks": {"groups": [{"job_id": "02000000", "ranks": [0, 1, 2], "count": 3, "frames": frames}]},
    }


def test_a_hang_case_names_the_rank_behind_and_where_the_others_wait():
    why = "rank 3 last entered #118; ranks 0-2 wait in gloo:all_reduce #119"
    case = hang_case(hang([{"rank": 3, "worker": "w3", "why": why}]), now=1_800_000_040.0)
    assert case.kind == "hang" and case.ranks == [3] and case.job_id == "02000000"
    assert case.summary == f"{why}; the others at train.py:88 in train_step for 40 s"
    assert case.to_json()["evidence"]["stacks"]["groups"][0]["ranks"] == [0, 1, 2]


def test_a_hang_without_a_rank_behind_says_where_everyone_stands():
    case = hang_case(hang([]), now=1_800_000_012.0)
    assert case.summary == "ranks 0-3 stood still at train.py:88 in train_step for 12 s"
    assert case.ranks == [0, 1, 2] and "collective one rank never reached" in (case.hint or "")


async def test_the_book_lists_newest_first_tells_the_stream_and_keeps_old_crashes(tmp_path):
    store = CrashStore(tmp_path)
    store.add(demo_crash(id="20261206-000000-00000001", time=100.0).to_store())
    hub = EventHub()
    book = CaseBook(hub, store, clock=lambda: 300.0)
    assert [c["id"] for c in book.listing()] == ["crash-20261206-000000-00000001"]  # filed before it started
    q = hub.subscribe()
    hub.emit("crash-filed", demo_crash(id="20261206-000000-00000002", time=200.0))
    hub.emit("hang-found", hang([]))
    assert [c["kind"] for c in book.listing()] == ["hang", "crash", "crash"]
    frames = [q.get_nowait(), q.get_nowait()]
    assert all(f.startswith(b"event: case\n") for f in frames)
    first = book.listing()[0]["id"]
    assert book.get(first).evidence["samples"] == 3
    with pytest.raises(NotFound, match="No case nope"):
        book.get("nope")
    await asyncio.sleep(0)


def test_the_cli_prints_a_table_and_one_case_with_its_evidence():
    case = crash_case(demo_crash()).to_json()
    table = format_list([case])
    assert "crash-20261206-010203-abcdef12" in table and "rank 2 raised FloatingPointError" in table
    detail = format_detail(case)
    assert (
        "evidence: crash record 20261206-010203-abcdef12 (raysleuth crashes 20261206-010203-abcdef12)"
        in detail
    )
    assert format_list([]).startswith("No cases")


class RecordingHub:
    def __init__(self):
        self.emitted: list = []

    def emit(self, topic, payload=None):
        self.emitted.append((topic, payload))


def gpu_sample(t: float, used_gib: float, total_gib: float = 80.0, **torch) -> dict:
    gib = 1 << 30
    gpu = {"gpu": 0, "uuid": "GPU-0", "used_bytes": int(used_gib * gib), "total_bytes": int(total_gib * gib)}
    return {"t": t, "gpus": [dict(gpu, device_used_bytes=gpu["used_bytes"])], **torch}


def test_a_worker_whose_gpu_memory_grows_is_one_memory_case_per_episode():
    from raysleuth.broker.cases.memory import MemoryWatch
    from raysleuth.broker.telemetry.gpu import GpuHistory
    from raysleuth.model.worker import Worker

    gib = 1 << 30
    gpu, hub = GpuHistory(), RecordingHub()
    watch = MemoryWatch(gpu, hub, clock=lambda: 500.0)
    workers = {"w1": Worker("w1", pid=11, rank=1, job_id="03000000")}
    for i in range(5):  # 3 GiB, then 0.5 GiB more at every step; torch reserves 1 GiB of it
        gpu.add("w1", 1, gpu_sample(float(i), 3 + 0.5 * i, torch_allocated=gib // 2, torch_reserved=gib))
        watch.check(["w1"], workers)
    [(topic, case)] = hub.emitted
    assert topic == "case" and case.kind == "memory" and case.ranks == [1] and case.job_id == "03000000"
    grew = "rank 1: GPU memory grew 2.0 GiB over 5 samples (3.0 GiB → 5.0 GiB), never falling"
    assert case.summary == f"{grew}; 4.0 GiB of it is not PyTorch's"
    last = case.evidence["samples"][-1]
    assert (last["torch_cached_free"], last["not_torch_bytes"]) == (gib // 2, 4 * gib)
    gpu.add("w1", 1, gpu_sample(5.0, 5.5))
    watch.check(["w1"], workers)
    assert len(hub.emitted) == 1  # the same episode: not filed again
    gpu.add("w1", 1, gpu_sample(6.0, 3.0))  # freed: the episode ends
    watch.check(["w1"], workers)
    gpu.add("w1", 1, gpu_sample(7.0, 78.0))  # a jump to 78 of 80 GiB: near the total
    watch.check(["w1"], workers)
    assert [c.evidence["reason"] for _, c in hub.emitted] == ["growing", "near_total"]
    assert hub.emitted[-1][1].summary == "rank 1: GPU 0 is 97% full (78.0 GiB of 80.0 GiB)"


def test_a_memory_case_names_the_largest_cuda_tensors_that_appeared(monkeypatch):
    """Issue 26: the agent looks for CUDA tensors only when torch's allocated memory grew by 256
    MiB since its last look (the first look is the baseline), and the case names the new ones,
    biggest first. torch.cuda faked at its seam (no GPU here)."""
    import fake_cuda

    from raysleuth.broker.cases.memory import MemoryWatch
    from raysleuth.broker.telemetry.gpu import GpuHistory
    from raysleuth.model.worker import Worker
    from raysleuth.probes import gpu as probe

    mib = 1 << 20
    monkeypatch.setenv("RAYSLEUTH_TORCH_CUDA", "fake_cuda")
    weights = {"ptr": 1, "bytes": 512 * mib, "shape": [8192, 16384], "dtype": "float32", "device": "cuda:0"}
    cache = {"ptr": 2, "bytes": 256 * mib, "shape": [64, 1024, 1024], "dtype": "float32", "device": "cuda:0"}
    small = {"ptr": 3, "bytes": 4 * mib, "shape": [1024, 1024], "dtype": "float32", "device": "cuda:0"}
    monkeypatch.setattr(fake_cuda, "LIVE", [weights])
    state: dict = {}
    assert probe.new_cuda_tensors(state, 512 * mib) is None  # the baseline
    monkeypatch.setattr(fake_cuda, "LIVE", [weights, small])
    assert probe.new_cuda_tensors(state, 516 * mib) is None  # grew 4 MiB: no look at all
    monkeypatch.setattr(fake_cuda, "LIVE", [weights, small, cache])
    new = probe.new_cuda_tensors(state, 772 * mib)
    assert [t["shape"] for t in new] == [
        [64, 1024, 1024],
        [1024, 1024],
    ]  # new since the baseline, biggest first
    assert probe.new_cuda_tensors(state, 800 * mib) is None  # 28 MiB since this look

    history, hub = GpuHistory(), RecordingHub()
    watch = MemoryWatch(history, hub, clock=lambda: 500.0)
    workers = {"w1": Worker("w1", pid=11, rank=1, job_id="03000000")}
    for i in range(5):
        sample = gpu_sample(float(i), 3 + 0.5 * i)
        if i == 3:
            sample["new_cuda_tensors"] = new
        history.add("w1", 1, sample)
        watch.check(["w1"], workers)
    [(_, case)] = hub.emitted
    named = "Tensor[64, 1024, 1024] float32 cuda:0 256 MiB, Tensor[1024, 1024] float32 cuda:0 4 MiB"
    assert case.summary.endswith(f"; new CUDA tensors: {named}"), case.summary
    assert case.evidence["new_cuda_tensors"] == new
