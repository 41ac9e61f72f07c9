"""Benchmark: what an idle agent adds to a Ray worker's footprint.

Idle actors with the agent and without it, on one local cluster with a broker (so the agents
register and heartbeat), measured from outside with psutil after they settled. Prints one JSON
line, each figure against the agent-less workers of the same run:
  rss_added_mb          median RSS with the agent minus without (target <= 5 MB)
  uss_added_mb          the same in unique set size (memory no other process shares)
  threads_added         Python threads the agent adds (threading.enumerate, median; target <= 1)
  os_threads_added      OS threads, each process's least over five looks, median with minus
                        without: gRPC's event-engine pool grows with calls, and the heartbeat's
                        keep one of its threads awake more often (informative)
  heartbeat_cpu_s_per_h CPU time an idle agent uses per hour, from a WINDOW_S window (with minus
                        without; absolute seconds, marked as such)
"""

from __future__ import annotations

import os
import statistics
import time

import _common  # first: it pins Ray's env before ray is imported
import psutil
import ray

ACTORS = int(os.environ.get("BENCH_ACTORS", "4"))
WINDOW_S = float(os.environ.get("BENCH_WINDOW_S", "20"))
SETTLE_S = float(os.environ.get("BENCH_SETTLE_S", "6"))


@ray.remote(num_cpus=0)
class Idle:
    def pid(self) -> int:
        return os.getpid()

    def agent_on(self) -> bool:
        import sys

        return "raysleuth.agent.core" in sys.modules

    def py_threads(self) -> int:
        import threading

        return len(threading.enumerate())


def start(agent: bool) -> list[int]:
    actors = [
        Idle.options(runtime_env={"env_vars": {"RAYSLEUTH": "1" if agent else "0"}}).remote()
        for _ in range(ACTORS)
    ]
    assert all(ray.get([a.agent_on.remote() for a in actors])) == agent
    start.keep += actors  # kept alive until the end
    return ray.get([a.pid.remote() for a in actors])


start.keep = []


def sample(pids: list[int]) -> dict:
    procs = [psutil.Process(p) for p in pids]
    mem = [p.memory_full_info() for p in procs]
    return {
        "rss": statistics.median(m.rss for m in mem) / 2**20,
        "uss": statistics.median(m.uss for m in mem) / 2**20,
        "threads": [p.num_threads() for p in procs],
        "cpu": [sum(p.cpu_times()[:2]) for p in procs],
    }


def main() -> None:
    with _common.cluster_with_broker() as _broker:
        on, off = start(True), start(False)
        time.sleep(SETTLE_S)  # a benchmark's settling time: imports done, first heartbeats sent
        a0, b0 = sample(on), sample(off)
        time.sleep(WINDOW_S)  # the window the idle CPU is measured over
        a1, b1 = sample(on), sample(off)
        # Ray starts and ends short-lived threads of its own: a process's count is its least over
        # a few looks, a second apart.
        looks = [(sample(on)["threads"], sample(off)["threads"], time.sleep(1))[:2] for _ in range(5)]
        a1["os_threads"] = statistics.median(min(x) for x in zip(*(lk[0] for lk in looks), strict=True))
        b1["os_threads"] = statistics.median(min(x) for x in zip(*(lk[1] for lk in looks), strict=True))
        py_on = statistics.median(ray.get([a.py_threads.remote() for a in start.keep[:ACTORS]]))
        py_off = statistics.median(ray.get([a.py_threads.remote() for a in start.keep[ACTORS:]]))
        cpu_on = statistics.median(y - x for x, y in zip(a0["cpu"], a1["cpu"], strict=True))
        cpu_off = statistics.median(y - x for x, y in zip(b0["cpu"], b1["cpu"], strict=True))
        result = {
            "actors_each": ACTORS,
            "rss_mb_agent": a1["rss"],
            "rss_mb_plain": b1["rss"],
            "rss_added_mb": a1["rss"] - b1["rss"],
            "uss_added_mb": a1["uss"] - b1["uss"],
            "threads_added": py_on - py_off,
            "os_threads_agent": a1["os_threads"],
            "os_threads_plain": b1["os_threads"],
            "os_threads_added": a1["os_threads"] - b1["os_threads"],
            "heartbeat_cpu_s_per_h": (cpu_on - cpu_off) / WINDOW_S * 3600,
        }
        for a in start.keep:
            ray.kill(a)
        _common.report("agent_footprint", result, {"rss_added_mb": 5.0, "threads_added": 1})


if __name__ == "__main__":
    main()
