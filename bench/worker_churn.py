"""Benchmark: many short-lived workers with the agent on; does Ray abort any (#22), and what does
the agent add to each worker's first task?

Runs on the interpreter that runs it. Half the rounds run in this driver's job, half in a job of
their own with a job-level runtime_env (RAYSLEUTH=1 and a PYTHONPATH, as a user sets them). Each
round starts 8 one-call tasks and 2 actors (killed after), each a new worker process that reports
what the agent added to its first task. Prints one JSON line:
  worker_starts       worker processes that ran a round's task or actor
  fatal_checks        fatal Ray checks (`] C ` lines) in the session's worker logs (target 0)
  registered          fraction of those workers whose agent reached the registry
  first_task_ms_{median,p95}_{no_points,one_point}
                      what the agent adds to a worker's first task: it reads the cluster's point
                      set from Ray's KV and arms the modules that have points, so a point set
                      before the job fires on the first call; half the workers start with no
                      cluster point, half with one (in a file none of them loads)
Set BENCH_WORKER_STARTS (default 100) for more.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import _common  # first: it pins Ray's env before ray is imported
import ray

STARTS = int(os.environ.get("BENCH_WORKER_STARTS", "100"))
TASKS, ACTORS = 8, 2


def registered_after() -> float | None:
    """Seconds the agent added to this worker's first task (None: it never reached the broker)."""
    from raysleuth.agent import get_agent

    agent = get_agent()
    link = getattr(agent, "link", None)
    t0 = time.monotonic()
    while link is not None and link.handle is None and time.monotonic() - t0 < 10:
        time.sleep(0.005)  # the agent registers from its own thread once the task began
    if link is None or link.handle is None:
        return None
    return getattr(agent, "first_task_wait_s", 0.0)  # an agent from before #22 added nothing


@ray.remote(num_cpus=0, max_calls=1)
def short_task():
    return registered_after()


@ray.remote(num_cpus=0)
class ShortActor:
    def __init__(self) -> None:
        self.waited = registered_after()

    def ready(self):
        return self.waited


def rounds(n: int) -> list:
    out = []
    for _ in range(n):
        refs = [short_task.remote() for _ in range(TASKS)]
        actors = [ShortActor.remote() for _ in range(ACTORS)]
        out += ray.get(refs) + ray.get([a.ready.remote() for a in actors])
        for a in actors:
            ray.kill(a)
    return out


def job(address: str, n: int) -> None:
    """A job of its own with a job-level runtime_env; prints its waits as one JSON line."""
    here = os.path.dirname(os.path.abspath(__file__))
    env = {"RAYSLEUTH": "1", "PYTHONPATH": os.pathsep.join([here, os.environ.get("PYTHONPATH", "")])}
    ray.init(address=address, log_to_driver=False, logging_level="ERROR", runtime_env={"env_vars": env})
    print(json.dumps(rounds(n)), flush=True)
    ray.shutdown()


def main() -> None:
    from raysleuth.client import BrokerClient
    from raysleuth.probes.logs import fatal_checks

    n = max(4, STARTS // (TASKS + ACTORS))
    os.environ["RAYSLEUTH"] = "1"  # the raylet's workers inherit it: the agent in every worker
    with _common.cluster_with_broker(num_cpus=4) as broker:
        address = ray.get_runtime_context().gcs_address
        logs = ray._private.worker.global_worker.node.get_logs_dir_path()
        env = {k: v for k, v in os.environ.items() if k != "RAYSLEUTH"}

        def phase(rounds_here: int) -> list:
            """Half the rounds in this driver's job, half in a job of its own."""
            waits = rounds(rounds_here // 2)
            out = subprocess.run(
                [sys.executable, __file__, "--job", address, str(rounds_here - rounds_here // 2)],
                capture_output=True, text=True, env=env, check=True,
            )  # fmt: skip
            return waits + json.loads(out.stdout.strip().splitlines()[-1])

        bare = phase(n // 2)
        # A point in a file no worker loads: every new worker reads and arms the set at its
        # first task (a full scan), and finds nothing to instrument.
        BrokerClient(broker.http, broker.token).set_breakpoints("/bench/elsewhere.py", [{"line": 1}])
        pointed = phase(n - n // 2)
        found = fatal_checks(logs)
    waits = bare + pointed

    def ms(xs: list, q: float) -> float:
        ok = sorted(w * 1000 for w in xs if w is not None)
        return ok[int(q * (len(ok) - 1))] if ok else -1.0

    _common.report(
        "worker_churn",
        {
            "worker_starts": len(waits),
            "fatal_checks": len(found),
            "fatal_examples": [f["check"] for f in found[:3]],
            "registered": sum(w is not None for w in waits) / len(waits),
            "first_task_ms_median_no_points": ms(bare, 0.5),
            "first_task_ms_p95_no_points": ms(bare, 0.95),
            "first_task_ms_median_one_point": ms(pointed, 0.5),
            "first_task_ms_p95_one_point": ms(pointed, 0.95),
        },
        {"fatal_checks": 0},
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--job"]:
        job(sys.argv[2], int(sys.argv[3]))
    else:
        main()
