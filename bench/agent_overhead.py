"""Benchmark: what the idle Ray Sleuth agent costs a Ray worker.

Runs on the interpreter that runs it (its venv needs python_backend installed). Prints one JSON
line with ratios against a baseline measured in the same run:
  loop_ratio          pure-Python loop in an actor with the agent / without (target <= 1.02):
                      the best time of PAIRS worker processes a side, each run REPEATS times
                      (one process against one varied by 4% on its own luck alone: memory
                      layout, which core); `loop_ratio_processes` compares the median of each
                      process's best instead (it moves with a neighbour's load bursts)
  start_added_ms      median actor start (create -> first reply) with agent minus without (<= 50)
  activation_ms       the .pth hook's own start-up cost in a fresh interpreter (import + thread)
A broker runs during the measurement, so the agent really registers and heartbeats.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

import _common  # first: it pins Ray's env before ray is imported
import ray

REPEATS = int(os.environ.get("BENCH_REPEATS", "5"))
"""Loop runs per worker process."""
PAIRS = int(os.environ.get("BENCH_PAIRS", "3"))
"""Worker processes per side (with the agent, without)."""
LOOP_N = int(os.environ.get("BENCH_LOOP_N", "8000000"))
STARTS = int(os.environ.get("BENCH_STARTS", "8"))


@ray.remote(num_cpus=1)
class Looper:
    def ready(self) -> int:
        return os.getpid()

    def agent_on(self) -> bool:
        return "raysleuth.agent.core" in sys.modules

    def loop(self, n: int) -> float:
        t = time.perf_counter()
        s = 0
        for i in range(n):
            s += i * i % 7
        return time.perf_counter() - t


def env(agent: bool) -> dict:
    return {"env_vars": {"RAYSLEUTH": "1" if agent else "0"}}


def measure_loop() -> dict:
    best_on, best_off, all_on, all_off = [], [], [], []
    for _ in range(PAIRS):
        on = Looper.options(runtime_env=env(True)).remote()
        off = Looper.options(runtime_env=env(False)).remote()
        assert ray.get(on.agent_on.remote()) and not ray.get(off.agent_on.remote())
        ray.get([on.loop.remote(LOOP_N // 10), off.loop.remote(LOOP_N // 10)])  # warm up
        t_on, t_off = [], []
        for i in range(REPEATS):  # interleaved, one at a time: the two never share a core
            pair = [(on, t_on), (off, t_off)] if i % 2 == 0 else [(off, t_off), (on, t_on)]
            for actor, out in pair:
                out.append(ray.get(actor.loop.remote(LOOP_N)))
        ray.kill(on)
        ray.kill(off)
        best_on.append(min(t_on))
        best_off.append(min(t_off))
        all_on += t_on
        all_off += t_off
    return {
        "pairs": PAIRS,
        "loop_s_agent_min": min(best_on),
        "loop_s_baseline_min": min(best_off),
        "loop_ratio": min(best_on) / min(best_off),
        "loop_ratio_processes": statistics.median(best_on) / statistics.median(best_off),
        "loop_ratio_median": statistics.median(all_on) / statistics.median(all_off),
        "baseline_process_spread": max(best_off) / min(best_off),
    }


def measure_starts() -> dict:
    times = {True: [], False: []}
    for i in range(STARTS * 2):
        agent = i % 2 == 0
        t = time.perf_counter()
        a = Looper.options(runtime_env=env(agent)).remote()
        ray.get(a.ready.remote())
        times[agent].append(time.perf_counter() - t)
        ray.kill(a)
    med_on, med_off = statistics.median(times[True]), statistics.median(times[False])
    return {
        "start_ms_agent": med_on * 1e3,
        "start_ms_baseline": med_off * 1e3,
        "start_added_ms": (med_on - med_off) * 1e3,
    }


def measure_activation() -> dict:
    code = (
        "import sys, time; sys.argv = ['/x/ray/_private/workers/default_worker.py']; "
        "t = time.perf_counter(); import raysleuth._activate; print(time.perf_counter() - t)"
    )
    base = "import sys, time; t = time.perf_counter(); print(time.perf_counter() - t)"
    clean = {k: v for k, v in os.environ.items() if k != "RAYSLEUTH"}

    def run(src):
        return float(
            subprocess.run(
                [sys.executable, "-c", src], capture_output=True, text=True, env=clean, check=True
            ).stdout
        )

    on = [run(code) for _ in range(7)]
    off = [run(base) for _ in range(7)]
    return {"activation_ms": (statistics.median(on) - statistics.median(off)) * 1e3}


def main() -> None:
    with _common.cluster_with_broker():
        result = {"ray": ray.__version__}
        result.update(measure_loop())
        result.update(measure_starts())
        result.update(measure_activation())
        _common.report("agent_overhead", result, {"loop_ratio": 1.02, "start_added_ms": 50})


if __name__ == "__main__":
    main()
