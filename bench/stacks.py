"""Benchmark: the hang radar (issue 12) against what users run today, in the same run.

Eight real workers (actors with the agent: seven in time.sleep, one looping in Python) on one
node. Prints one JSON line:
  radar_s_8_workers   median GET /v1/stacks of the 8 workers, request to grouped stacks (<= 1.0)
  ray_stack_s         median `ray stack` on the same node (py-spy --native over every Ray worker
                      process of the node, one after another: the anchor users have today)
  radar_vs_ray_stack  radar_s_8_workers / ray_stack_s (<= 1.0: faster than `ray stack`)
  pyspy_8_s           median of `py-spy dump` over exactly the 8 pids, one after another (a
                      second, fairer anchor: same workers, no --native)
  walk_ms_median      the pause one dump costs a worker: the agent's walk under the GIL (<= 5)
`ray stack` calls `sudo`; where there is none (root in a container) a shim that runs the command
as is is put first on PATH for it, so it measures py-spy, not a missing sudo.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common  # first: it pins Ray's env before ray is imported
import ray

from raysleuth.client import BrokerClient

os.environ["RAYSLEUTH"] = "1"  # workers the cluster starts inherit it

WORKERS = 8
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "15"))
ANCHOR_ROUNDS = int(os.environ.get("BENCH_ANCHOR_ROUNDS", "3"))


class Held:
    def pid(self) -> int:
        return os.getpid()

    def hold(self, seconds: float, busy: bool) -> int:
        end = time.monotonic() + seconds
        n = 0
        while time.monotonic() < end:
            if busy:
                n += 1  # a rank somewhere else, in Python
            else:
                time.sleep(seconds)
        return n


def ray_stack_env() -> dict:
    """PATH with the venv's py-spy, and a `sudo` that just runs its command where none exists."""
    path = [str(Path(sys.executable).parent)]
    if shutil.which("sudo") is None:
        shim = Path(tempfile.mkdtemp(prefix="rs-bench-sudo-"))
        (shim / "sudo").write_text('#!/bin/sh\nexec "$@"\n')
        (shim / "sudo").chmod(0o755)
        path.insert(0, str(shim))
    return dict(os.environ, PATH=os.pathsep.join(path + [os.environ.get("PATH", "")]))


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    with _common.cluster_with_broker(num_cpus=4) as broker:
        client = BrokerClient(broker.http, broker.token, timeout=60)
        actors = [ray.remote(num_cpus=0)(Held).remote() for _ in range(WORKERS)]
        pids = ray.get([a.pid.remote() for a in actors], timeout=120)
        refs = [a.hold.remote(600, i == WORKERS - 1) for i, a in enumerate(actors)]
        deadline = time.monotonic() + 60
        ids: list[str] = []
        while len(ids) < WORKERS:
            ids = [w["id"] for w in client.workers() if w["pid"] in pids and w["agent"] and w["task"]]
            if time.monotonic() > deadline:
                raise TimeoutError(f"only {len(ids)} of {WORKERS} workers known with their task")
            time.sleep(0.1)
        path = "/v1/stacks?workers=" + ",".join(ids)
        first = client.get(path)  # warm: relays, linecache in the workers
        assert len(first["workers"]) == WORKERS and all(w["source"] == "agent" for w in first["workers"])

        radar, walks, groups = [], [], 0
        for _ in range(ROUNDS):
            t = time.perf_counter()
            res = client.get(path)
            radar.append(time.perf_counter() - t)
            walks += [w["walk_ms"] for w in res["workers"] if w.get("walk_ms") is not None]
            groups = len(res["groups"])
        if os.environ.get("BENCH_SHOW"):
            print(res["text"], file=sys.stderr)

        env = ray_stack_env()
        ray_stack, dumped = [], 0
        for _ in range(ANCHOR_ROUNDS):
            t = time.perf_counter()
            out = subprocess.run(["ray", "stack"], env=env, capture_output=True, text=True, timeout=600)
            ray_stack.append(time.perf_counter() - t)
            dumped = out.stdout.count("Stack dump for ")
        spy = str(Path(sys.executable).with_name("py-spy"))
        pyspy = [
            timed(lambda: [subprocess.run([spy, "dump", "--pid", str(p)], capture_output=True) for p in pids])
            for _ in range(ANCHOR_ROUNDS)
        ]
        for a in actors:
            ray.kill(a)
        del refs

        med = statistics.median
        result = {
            "workers": WORKERS,
            "rounds": ROUNDS,
            "groups": groups,
            "radar_s_8_workers": med(radar),
            "radar_s_max": max(radar),
            "ray_stack_s": med(ray_stack),
            "ray_stack_processes": dumped,
            "radar_vs_ray_stack": med(radar) / med(ray_stack),
            "pyspy_8_s": med(pyspy),
            "radar_vs_pyspy_8": med(radar) / med(pyspy),
            "walk_ms_median": med(walks),
            "walk_ms_max": max(walks),
        }
        _common.report(
            "stacks", result, {"radar_s_8_workers": 1.0, "radar_vs_ray_stack": 1.0, "walk_ms_median": 5.0}
        )


if __name__ == "__main__":
    main()
