"""torch's flight recorder read by the agent (raysleuth/agent/collectives.py): real processes
with a real gloo group on CPU, one rank an all-reduce behind; and nothing at all where the
program never imported torch."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from raysleuth.model.stacks import find_behind, group_stacks

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "fr_rank.py"
BACKEND = Path(__file__).resolve().parents[3] / "python_backend"

needs_torch = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None,
    reason=f"torch is not installed in {sys.executable} (the 3.11 venv .venv has the CPU build)",
)


def core(entry: dict) -> dict:
    """An entry without the queue's started/completed numbers (checked on their own)."""
    return {k: v for k, v in entry.items() if k not in ("started", "completed")}


def child_env(**extra) -> dict:
    env = dict(os.environ, PYTHONPATH=str(BACKEND), **extra)
    env.pop("RAYSLEUTH", None)
    return env


def test_a_plain_process_gets_none_and_torch_stays_unimported():
    code = (
        "import sys, json\n"
        "from raysleuth.agent.collectives import read_flight_recorder\n"
        "print(json.dumps([read_flight_recorder(), 'torch' in sys.modules]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=child_env(), capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [None, False]


def read_phase(proc: subprocess.Popen, phase: str) -> dict:
    line = proc.stdout.readline()
    assert line, f"rank exited: {proc.stderr.read()}"
    msg = json.loads(line)
    assert msg["phase"] == phase, msg
    return msg


@needs_torch
def test_three_ranks_one_collective_behind_each_report_their_place(tmp_path):
    world = 3
    env = child_env(TORCH_FR_BUFFER_SIZE="2000")
    procs = [
        subprocess.Popen(
            [sys.executable, str(FIXTURE), str(r), str(world), str(tmp_path / "store")],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in range(world)
    ]
    try:
        waiting = [read_phase(p, "waiting")["fr"] for p in procs]
        procs[-1].stdin.write("go\n")
        procs[-1].stdin.flush()
        done = [read_phase(p, "done")["fr"] for p in procs]
        plain = [read_phase(p, "plain") for p in procs]
        assert [p.wait(timeout=60) for p in procs] == [0] * world
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    op = "gloo:all_reduce"
    # The queue's numbers (issue 27): rank 0 enqueued #3, completed #2 (gloo records no start).
    assert (waiting[0][0]["completed"], waiting[0][0]["started"]) == (2, -1)
    assert [e["completed"] for e in waiting[2]] == [2, 1]
    waiting = [[core(e) for e in fr] for fr in waiting]
    done = [[core(e) for e in fr] for fr in done]
    assert waiting[0] == [{"group": "0", "rank": 0, "seq": 3, "op": op, "state": "scheduled"}]
    assert waiting[1] == [
        {"group": "0", "rank": 1, "seq": 3, "op": op, "state": "scheduled"},
        {"group": "1", "rank": 0, "seq": 1, "op": op, "state": "completed"},
    ]
    # The lagging rank runs Python: its finished collectives' names are not worth the costly
    # read of all entries (it holds the GIL); it has them only if it saw them in flight.
    assert [dict(e, op=None) for e in waiting[2]] == [
        {"group": "0", "rank": 2, "seq": 2, "op": None, "state": "completed"},
        {"group": "1", "rank": 1, "seq": 1, "op": None, "state": "completed"},
    ]
    assert {e["op"] for e in waiting[2]} <= {op, "?"}
    done_0 = [e for fr in done for e in fr if e["group"] == "0"]
    assert done_0[:2] == [
        {"group": "0", "rank": r, "seq": 3, "op": op, "state": "completed"} for r in range(2)
    ]  # ranks 0-1 keep the name they read while waiting in #3
    assert dict(done_0[2], op=None) == {"group": "0", "rank": 2, "seq": 3, "op": None, "state": "completed"}
    assert all(p == {"phase": "plain", "before": None, "no_group": None} for p in plain)

    # What the broker makes of it: the rank that has not entered #3 is the one behind.
    workers = [
        {"worker": f"w{r}", "rank": r, "job_id": "j", "threads": [{"main": True, "frames": []}]}
        for r in range(world)
    ]
    collectives = [dict(e, worker=f"w{r}") for r, fr in enumerate(waiting) for e in fr]
    assert find_behind(workers, group_stacks(workers), collectives) == [
        {"rank": 2, "worker": "w2", "why": "rank 2 last entered #2; ranks 0-1 wait in gloo:all_reduce #3"}
    ]


SOLO = """
import json, sys, time
import torch, torch.distributed as dist
from raysleuth.agent.collectives import read_flight_recorder
dist.init_process_group("gloo", init_method="file://" + sys.argv[1], rank=0, world_size=1)
dist.all_reduce(torch.ones(2))
dist.barrier()
end = time.monotonic() + 30  # gloo marks a collective completed a moment after it returns
while (first := read_flight_recorder()) and first[0]["state"] != "completed" and time.monotonic() < end:
    time.sleep(0.005)  # poll, leaving the core to gloo's threads (a busy machine starved them)
def broken(*a, **k):
    raise RuntimeError("torch changed")
torch._C._distributed_c10d._dump_fr_trace_json = broken
print(json.dumps([first, read_flight_recorder()]))
"""


def run_solo(folder: Path, **env) -> list:
    out = subprocess.run(
        [sys.executable, "-c", SOLO, str(folder / "store")],
        env=child_env(**env),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stderr == "", "the reader must never write to the worker's output"
    return json.loads(out.stdout)


@needs_torch
def test_a_recorder_turned_off_tells_nothing_and_a_broken_torch_never_raises(tmp_path):
    first, broken = run_solo(tmp_path, TORCH_FR_BUFFER_SIZE="0")
    assert first is None and broken is None
    (tmp_path / "on").mkdir()
    first, broken = run_solo(tmp_path / "on", TORCH_FR_BUFFER_SIZE="10")
    assert first[0]["completed"] == 2
    first = [core(e) for e in first]
    assert [dict(e, op=None) for e in first] == [
        {"group": "0", "rank": 0, "seq": 2, "op": None, "state": "completed"}
    ]
    assert first[0]["op"] in ("gloo:barrier", "?")  # named only if it was seen in flight
    assert broken is None
