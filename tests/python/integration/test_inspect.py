"""Tensors across ranks on the real cluster (issue 14): raysleuth.inspect() in four real ranks,
the broker's table with the odd rank flagged (HTTP and CLI); compare-across-ranks as a snapshot
point with expressions, no code change; a logpoint that prints a tensor's summary; a CUDA
out-of-memory crash record (torch.cuda faked at its seam: no GPU here). torch where installed,
else numpy."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest
import ray
import tensor_job
from helpers import FIXTURES, live_worker_id, marker_line, wait_until

JOB = str(FIXTURES / "tensor_job.py")
LINE = marker_line(JOB, "tensor-line")
RANKS = 4
HAS_TORCH = importlib.util.find_spec("torch") is not None
LIB = "torch" if HAS_TORCH else "numpy"
KIND = "Tensor" if HAS_TORCH else "ndarray"


@pytest.fixture(scope="module")
def ranks(ray_cluster, client):
    cls = ray.remote(num_cpus=0)(tensor_job.TensorRank)
    actors = [cls.remote(r, RANKS, LIB) for r in range(RANKS)]
    pids = ray.get([a.pid.remote() for a in actors], timeout=60)
    wait_until(
        lambda: len([w for w in client.workers() if w["pid"] in pids and w["rank"] is not None]) == RANKS,
        timeout=20,
        message="4 ranked workers listed",
    )
    yield actors
    for a in actors:
        ray.kill(a)


@pytest.fixture
def clean_points(client):
    yield
    client.delete("/v1/breakpoints")
    for s in client.get("/v1/snapshots"):
        client.delete(f"/v1/snapshots/{s['id']}")


def flagged(rows) -> list[int]:
    return sorted(r["rank"] for r in rows if r["differs"])


def test_inspect_on_four_ranks_flags_rank_2_at_the_step_it_drifted(broker, client, ranks):
    assert ray.get([a.train.remote(3, 1) for a in ranks], timeout=60) == [3] * RANKS
    step1 = wait_until(
        lambda: len(x := client.get("/v1/inspect?name=grad&step=1")) == RANKS and x,
        15,
        message="four rows of grad at step 1",
    )
    assert [r["rank"] for r in step1] == [0, 1, 2, 3]
    assert flagged(step1) == [2] and "hash" in step1[2]["why"]
    r0 = step1[0]
    assert (r0["name"], r0["step"], r0["shape"], r0["dtype"]) == ("grad", 1, [64, 64], "float32")
    assert r0["nan"] == 0 and r0["inf"] == 0 and abs(r0["mean"]) < 1e-5 and r0["norm"] > 0
    assert step1[2]["hash"] != r0["hash"] == step1[1]["hash"] == step1[3]["hash"]
    assert abs(step1[2]["max"] - r0["max"]) < 1e-6  # the drift is at one element inside
    wait_until(lambda: len(client.get("/v1/inspect?name=grad&step=2")) == RANKS, 15, message="step 2")
    for step in ("0", "2"):
        assert flagged(client.get(f"/v1/inspect?name=grad&step={step}")) == []
    assert {r["step"] for r in client.get("/v1/inspect?name=grad")} == {2}  # the latest by default
    # a tolerance that forgives 1e-3 on one element does not forgive a different hash
    assert flagged(client.get("/v1/inspect?name=grad&step=1&rtol=0.5")) == [2]

    env = dict(os.environ, RAYSLEUTH_TOKEN=broker.token)
    cli = [sys.executable, "-m", "raysleuth", "inspect", "grad", "--step", "1", "--broker", broker.http]
    out = subprocess.run(cli, env=env, capture_output=True, text=True, check=True).stdout
    marked = [ln for ln in out.splitlines() if ln.startswith("! grad")]
    assert len(marked) == 1 and marked[0].split()[3] == "2", out
    assert "rank 2 grad step 1: hash differs from the majority (3 of 4)" in out
    as_json = subprocess.run([*cli, "--json"], env=env, capture_output=True, text=True, check=True).stdout
    assert '"differs": true' in as_json


def test_compare_across_ranks_over_http_records_four_summaries_and_flags_rank_2(client, ranks, clean_points):
    body = {"path": JOB, "line": LINE, "expressions": ["t", "type(t).__name__"]}
    sid = client.post("/v1/snapshots", body)["id"]
    listed = next(s for s in client.get("/v1/snapshots") if s["id"] == sid)
    assert listed["expressions"] == ["t", "type(t).__name__"] and listed["count"] == 1
    wait_until(
        lambda: next((s["armed"] for s in client.get("/v1/snapshots") if s["id"] == sid), 0) == RANKS,
        15,
        message="the snapshot point armed on 4 workers",
    )
    ray.get([a.look.remote() for a in ranks], timeout=60)
    rows = wait_until(lambda: len(x := client.get(f"/v1/snapshots/{sid}")) == RANKS and x, 15)
    assert sorted(r["rank"] for r in rows) == [0, 1, 2, 3]
    by_rank = {r["rank"]: r for r in rows}
    assert [r for r in range(RANKS) if by_rank[r]["differs"]] == [2]
    for rank, row in by_rank.items():
        t, kind = row["values"]
        assert (t["expression"], t["shape"], t["dtype"]) == ("t", [64, 64], "float32")
        assert t["differs"] == (rank == 2) and len(t["hash"]) == 16
        assert kind["value"] == repr(KIND) and not kind["differs"]
        assert row["frames"][0]["line"] == LINE
        assert row["frames"][0]["locals"]["t"].startswith(f"{KIND}[64, 64] float32")  # not its numbers
    # once per worker: passing the line again records nothing more
    ray.get([a.look.remote() for a in ranks], timeout=60)
    assert len(client.get(f"/v1/snapshots/{sid}")) == RANKS


def test_a_logpoint_with_a_tensor_prints_its_summary(client, ranks, clean_points):
    seen = client.get("/v1/logs")
    since = seen[-1]["seq"] if seen else 0
    client.set_breakpoints(JOB, [{"line": LINE, "logMessage": "t={t}", "ranks": [0]}])
    wait_until(lambda: sum(b["armed"] for b in client.breakpoints() if b["line"] == LINE) == 1, 15)
    ray.get(ranks[0].look.remote(), timeout=60)
    [line] = wait_until(lambda: client.get(f"/v1/logs?since={since}"), 15, message="the logpoint line")
    expected = f"t={KIND}[64, 64] float32" + (" cpu" if HAS_TORCH else "") + " norm=3.7e+01 nan=0"
    assert (line["rank"], line["message"]) == (0, expected)


def test_evaluate_on_a_paused_rank_shows_the_tensors_summary(client, ranks, clean_points):
    pid = ray.get(ranks[1].pid.remote(), timeout=30)
    client.set_breakpoints(JOB, [{"line": LINE, "ranks": [1]}])
    wait_until(lambda: sum(b["armed"] for b in client.breakpoints() if b["line"] == LINE) == 1, 15)
    ref = ranks[1].look.remote()
    wait_until(
        lambda: any(w["pid"] == pid and w["state"] == "paused" for w in client.workers()),
        20,
        message="rank 1 paused at the line",
    )
    [row] = client.post("/v1/evaluate", {"expression": "t", "ranks": [1]})
    expected = f"{KIND}[64, 64] float32" + (" cpu" if HAS_TORCH else "") + " norm=3.7e+01 nan=0"
    assert (row["rank"], row["value"]) == (1, expected)
    [row] = client.post("/v1/evaluate", {"expression": "{'g': t, 'n': 2}", "ranks": [1]})
    assert row["value"] == "{'g': " + expected + ", 'n': 2}"
    client.delete("/v1/breakpoints")
    client.post("/v1/continue", {"ranks": [1]})
    assert ray.get(ref, timeout=30) == pytest.approx(0.0, abs=1e-2)


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_cuda_oom_crash_record_keeps_torchs_memory_and_says_what_to_try(client):
    env = {"RAYSLEUTH_TORCH_CUDA": "fake_cuda", "RAYSLEUTH_POSTMORTEM_HOLD": "0"}
    cls = ray.remote(num_cpus=0, max_restarts=0)(tensor_job.TensorRank).options(runtime_env={"env_vars": env})
    a = cls.remote(40, 1, "torch")
    try:
        wid = live_worker_id(client, ray.get(a.pid.remote(), timeout=60))
        with pytest.raises(ray.exceptions.RayTaskError) as err:
            ray.get(a.oom.remote(), timeout=60)
        assert "OutOfMemoryError" in str(err.value)
        summary = wait_until(
            lambda: next((c for c in client.get("/v1/crashes") if c["worker"].get("id") == wid), None),
            15,
            message="the crash record",
        )
        assert "expandable_segments" in summary["hint"] and "cuda_memory has" in summary["hint"]
        rec = client.get(f"/v1/crashes/{summary['id']}")
        cuda = rec["cuda_memory"]
        assert "PyTorch CUDA memory summary" in cuda["summary"]
        assert [b["bytes"] >> 30 for b in cuda["largest"][:3]] == [40, 20, 8]
        assert cuda["allocated_bytes"] == 70 << 30 and cuda["tensors"] == []
        assert rec["frames"][0]["locals"]["big"] == "Tensor[64, 64] float32 cpu norm=3.7e+01 nan=0"
    finally:
        ray.kill(a)
