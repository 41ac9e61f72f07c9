"""No expression takes a worker hostage (#37 item 9), for real: real Ray workers paused at a
cluster breakpoint, the real broker, its audit log. The suite's evaluate budget is 3 s
(conftest.py)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import cluster_bp
import pytest
import ray
from helpers import FIXTURES, dap_address, marker_line, wait_until

from raysleuth.cli.table import format_workers
from raysleuth.dap.client import open_session
from raysleuth.shared.errors import SleuthError

JOB = str(FIXTURES / "cluster_bp.py")
LINE = marker_line(JOB, "cbp-line")
RANKS = 4
EXPECTED = [[(r * 10 + s) * 2 for s in range(3)] for r in range(RANKS)]
BUDGET = float(os.environ["RAYSLEUTH_EVALUATE_BUDGET_S"])
HUGE = "sum(range(10**12))"  # a C loop that holds the GIL for hours


@pytest.fixture
def ranked(ray_cluster, client):
    client.delete("/v1/breakpoints")
    cls = ray.remote(num_cpus=0)(cluster_bp.Ranked)
    actors = [cls.remote(r, RANKS) for r in range(RANKS)]
    pids = ray.get([a.pid.remote() for a in actors])
    wait_until(
        lambda: len([w for w in client.workers() if w["pid"] in pids and w["rank"] is not None]) == RANKS,
        timeout=15,
        message="4 ranked workers listed",
    )
    yield actors, pids
    client.delete("/v1/breakpoints")
    client.post("/v1/continue", {})
    for a in actors:
        ray.kill(a)


def by_pid(client, pid):
    return next((w for w in client.workers() if w["pid"] == pid), None)


def pause(client, actors, pids, ranks):
    client.set_breakpoints(JOB, [{"line": LINE, "condition": "step == 1", "ranks": ranks}])
    wait_until(
        lambda: all(
            pids[r] in {w["pid"] for a in client.breakpoints() for w in a["armed_on"]} for r in ranks
        ),
        10,
        message=f"armed in ranks {ranks}",
    )
    refs = {r: actors[r].work.remote(3) for r in ranks}
    wait_until(
        lambda: all((by_pid(client, pids[r]) or {}).get("state") == "paused" for r in ranks),
        20,
        message=f"ranks {ranks} paused",
    )
    return refs


async def attach_and_leave(broker, worker_id: str) -> None:
    host, port = dap_address(broker)
    s = await open_session(host, port, {"token": broker.token, "worker": worker_id})
    await s.request("disconnect", {}, check=False)
    await s.close()


def cli(broker, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "raysleuth", *args, "--broker", broker.http],
        env={**os.environ, "RAYSLEUTH_TOKEN": broker.token, "RAYSLEUTH": "0"},
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip


def audit_lines(broker) -> list[dict]:
    path = Path(broker.ready["token_file"]).parent / "audit.log"
    assert (path.stat().st_mode & 0o777) == 0o600
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_an_evaluate_that_holds_the_gil_is_refused_then_answered_shown_busy_and_ended(client, broker, ranked):
    actors, pids = ranked
    refs = pause(client, actors, pids, [0, 1])
    # Refused unless forced: the language server's check, on the broker.
    with pytest.raises(SleuthError) as refused:
        client.post("/v1/evaluate", {"expression": HUGE, "ranks": [0]})
    assert refused.value.status == 400 and "may never finish" in refused.value.message
    assert '"force": true' in refused.value.hint

    t0 = time.time()
    [row] = client.post("/v1/evaluate", {"expression": HUGE, "ranks": [0], "force": True})
    took = time.time() - t0
    assert took < min(BUDGET + 2, 10), took  # the broker answers for a worker that cannot
    assert row["error"].startswith(f"still running after {BUDGET:g} s: its agent does not answer"), row
    busy = by_pid(client, pids[0])["busy"]
    assert busy["what"] == "evaluate" and busy["expression"] == HUGE and t0 <= busy["since"] <= t0 + took
    assert "busy (evaluate since " in format_workers(client.workers())  # what `raysleuth list` shows

    # The rest of the cluster is unaffected: rank 1 evaluates and continues; rank 0 answers at once.
    t1 = time.time()
    rows = client.post("/v1/evaluate", {"expression": "(self.rank, step)"})
    assert time.time() - t1 < 2, rows
    assert rows[0]["error"].startswith("busy: an evaluate since ") and rows[1]["value"] == "(1, 1)", rows
    res = client.post("/v1/continue", {})
    assert res["continued"] == [by_pid(client, pids[1])["id"]] and res["skipped"][0]["reason"].startswith(
        "busy"
    )
    assert ray.get(refs[1], timeout=30) == EXPECTED[1]
    client.delete("/v1/breakpoints")
    assert ray.get(actors[2].work.remote(3), timeout=30) == EXPECTED[2]

    # End it: the process goes, the rest runs on.
    wid = by_pid(client, pids[0])["id"]
    assert client.post(f"/v1/workers/{wid}/kill", {}) == {"ok": True, "worker": wid, "pid": pids[0]}
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(refs[0], timeout=30)
    wait_until(
        lambda: (w := by_pid(client, pids[0])) is None or w["state"] == "exited", 30, message="rank 0 ended"
    )
    assert ray.get(actors[3].work.remote(3), timeout=30) == EXPECTED[3]

    # Each action that ran code is a line of the audit log: who (this process), what, where.
    entries = audit_lines(broker)
    evaluates = [e for e in entries if e["action"] == "evaluate" and e["expression"] == HUGE]
    assert len(evaluates) == 1 and evaluates[0]["workers"] == [wid] and evaluates[0]["force"] is True
    kill = next(e for e in entries if e["action"] == "kill" and e["workers"] == [wid])
    assert kill["busy"] == HUGE and kill["pid"] == pids[0]
    for e in (evaluates[0], kill):
        assert e["client"]["uid"] == os.getuid() and e["client"]["pid"] == os.getpid(), e
    point = [e for e in entries if e["action"] == "breakpoint" and e["expression"] == "step == 1"]
    assert point and point[-1]["line"] == LINE and point[-1]["scope"] == "rank 0-1", point
    # `raysleuth audit` shows them, one escaped line each; `raysleuth list` showed the busy worker.
    out = cli(broker, "audit", "--limit", "1000").stdout
    assert f"evaluate (forced)  uid {os.getuid()}, pid {os.getpid()}  ranks 0  {HUGE}" in out, out
    assert f"kill  uid {os.getuid()}, pid {os.getpid()}  ranks 0" in out, out
    assert all(line.isprintable() for line in out.splitlines())


def test_a_python_evaluate_past_its_budget_is_interrupted_and_the_worker_continues(client, broker, ranked):
    actors, pids = ranked
    refs = pause(client, actors, pids, [1])
    endless = "any(x for x in iter(int, 1))"  # Python bytecode forever; not flagged
    t0 = time.time()
    [row] = client.post("/v1/evaluate", {"expression": endless, "ranks": [1]})
    assert time.time() - t0 < BUDGET + 1
    assert row["error"].startswith(f"still running after {BUDGET:g} s: interrupted"), row
    assert by_pid(client, pids[1])["busy"] is None
    # Its thread is gone: the only evaluate thread left is the one that answers this (debugpy
    # hides ours from threading.enumerate()).
    [row] = client.post(
        "/v1/evaluate",
        {"expression": "[t.name for t in __import__('threading')._active.values()]", "ranks": [1]},
    )
    assert row["value"].count("raysleuth-evaluate") == 1, row
    client.delete("/v1/breakpoints")
    assert client.post("/v1/continue", {"ranks": [1]})["continued"]
    assert ray.get(refs[1], timeout=30) == EXPECTED[1]
    # A DAP attach (from which any code may run there) is a line of the audit log too.
    wid = by_pid(client, pids[1])["id"]
    asyncio.run(attach_and_leave(broker, wid))
    attach = [e for e in audit_lines(broker) if e["action"] == "attach" and e["workers"] == [wid]]
    assert len(attach) == 1 and attach[0]["ranks"] == [1] and attach[0]["pid"] == pids[1], attach
    assert attach[0]["client"]["uid"] == os.getuid() and attach[0]["client"]["pid"] == os.getpid()
