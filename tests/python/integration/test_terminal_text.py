"""A job's text cannot drive the terminal of whoever lists the cluster (#37): an actor named with an
escape sequence and a newline, on a real Ray cluster, through the real broker and `raysleuth list`."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import ranked_job
import ray
from helpers import live_worker

FORGER = "\x1b[31mX\nFAKE  ROW"
"""Paints the rest of the line red and starts a row of its own."""


def test_list_prints_a_forging_actor_name_as_one_escaped_line(broker, client, ray_cluster):
    actor = ray.remote(num_cpus=0)(ranked_job.RankedTrainer).options(name=FORGER).remote(7, 8)
    try:
        pid = ray.get(actor.pid.remote(), timeout=60)
        w = live_worker(client, pid, timeout=30, actor_name=FORGER, rank=7)
        env = dict(os.environ, RAYSLEUTH_TOKEN=broker.token)
        cmd = [sys.executable, "-m", "raysleuth", "list", "--broker", broker.http]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60, check=True).stdout
        assert "\x1b" not in out and "\nFAKE" not in out, out
        mine = [line for line in out.splitlines() if w["id"][:8] in line]
        assert len(mine) == 1 and "RankedTrainer '\\x1b[31mX\\nFAKE  ROW'" in mine[0], out
        listed = subprocess.run(
            [*cmd, "--json"], env=env, capture_output=True, text=True, timeout=60, check=True
        )
        assert "\x1b" not in listed.stdout  # JSON escapes it: \u001b
        assert [x["actor_name"] for x in json.loads(listed.stdout) if x["id"] == w["id"]] == [FORGER]
    finally:
        ray.kill(actor)
