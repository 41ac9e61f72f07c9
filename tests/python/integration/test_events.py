"""The cluster's timeline: raysleuth.event() in real workers reaches the broker in batches with
the heartbeat; GET /v1/events and `raysleuth events` (list, JSON, trace export) show it by rank."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import gpu_job
import pytest
import ray
from helpers import wait_until


def test_events_of_every_rank_in_the_timeline_and_the_trace(broker, client, tmp_path):
    since = max([e["seq"] for e in client.get("/v1/events")], default=0)
    cls = ray.remote(num_cpus=0)(gpu_job.Stepper)
    actors = [cls.remote(r) for r in (0, 1)]
    try:
        assert ray.get([a.run.remote(3) for a in actors], timeout=60) == [3, 3]
        events = wait_until(
            lambda: (x := client.get(f"/v1/events?since={since}&name=step")) and len(x) >= 6 and x,
            15,
            message="six step events",
        )
        got = sorted((e["rank"], e["fields"]["step"]) for e in events)
        assert got == [(r, s) for r in (0, 1) for s in range(3)]
        rank1 = [e for e in events if e["rank"] == 1]
        assert [e["fields"]["loss"] for e in rank1] == [2.0, 1.5, 1.333]
        assert all(e["worker"] and e["pid"] and e["time"] > 0 for e in events)
        assert [e["seq"] for e in events] == sorted(e["seq"] for e in events)

        env = dict(os.environ, RAYSLEUTH_TOKEN=broker.token)
        cli = [sys.executable, "-m", "raysleuth", "events", "--broker", broker.http, "--since", str(since)]
        listed = subprocess.run([*cli, "--name", "step"], env=env, capture_output=True, text=True, check=True)
        out = listed.stdout
        assert out.count(" step ") == 6 and "rank 1" in out and "loss=1.5" in out
        trace_file = tmp_path / "trace.json"
        subprocess.run([*cli, "--export", str(trace_file)], env=env, capture_output=True, check=True)
        trace = json.loads(trace_file.read_text())["traceEvents"]
        names = {t["tid"]: t["args"]["name"] for t in trace if t["ph"] == "M"}
        assert names[0] == "rank 0" and names[1] == "rank 1"
        steps = [t for t in trace if t["ph"] == "i" and t["name"] == "step"]
        assert len(steps) >= 6 and {t["tid"] for t in steps} == {0, 1}
        assert steps == sorted(steps, key=lambda t: t["ts"])
    finally:
        for a in actors:
            ray.kill(a)


def test_events_rejects_a_bad_since_with_a_hint(client):
    with pytest.raises(Exception) as err:
        client.get("/v1/events?since=yesterday")
    assert getattr(err.value, "status", None) == 400
