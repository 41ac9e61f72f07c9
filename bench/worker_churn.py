"""Benchmark: many short-lived workers with the agent on; does Ray abort any (#22), and how soon
after its first task does each worker's agent reach the broker?

Runs on the interpreter that runs it. Half the rounds run in this driver's job, half in a job of
their own with a job-level runtime_env (RAYSLEUTH=1 and a PYTHONPATH, as a user sets them). Each
round starts 8 one-call tasks and 2 actors (killed after), each a new worker process that reports
how long its first task waited. Prints one JSON line:
  worker_starts       worker processes that ran a round's task or actor
  fatal_checks        fatal Ray checks (`] C ` lines) in the session's worker logs (target 0)
  registered          fraction of those workers whose agent reached the registry
  first_task_wait_ms_median  how long a worker's first task waited for its agent to reach the
  first_task_wait_ms_p95     broker and take the cluster's points (the price of registering only
                             once a task began: before #22 no task waited, and some workers died)
Set BENCH_WORKER_STARTS (default 100) for more.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

import _common  # first: it pins Ray's env before ray is imported
import ray

STARTS = int(os.environ.get("BENCH_WORKER_STARTS", "100"))
TASKS, ACTORS = 8, 2


def registered_after() -> float | None:
    """Seconds this worker's first task waited for its agent to reach the broker and take the
    cluster's points (None: the agent never reached it)."""
    from raysleuth.agent import get_agent

    agent = get_agent()
    if agent is None or agent.link.handle is None:
        return None
    return agent.first_task_wait_s


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
    from raysleuth.nodelogs import fatal_checks

    n = max(2, STARTS // (TASKS + ACTORS))
    os.environ["RAYSLEUTH"] = "1"  # the raylet's workers inherit it: the agent in every worker
    with _common.cluster_with_broker(num_cpus=4):
        address = ray.get_runtime_context().gcs_address
        logs = ray._private.worker.global_worker.node.get_logs_dir_path()
        waits = rounds(n // 2)
        env = {k: v for k, v in os.environ.items() if k != "RAYSLEUTH"}
        out = subprocess.run(
            [sys.executable, __file__, "--job", address, str(n - n // 2)],
            capture_output=True, text=True, env=env, check=True,
        )  # fmt: skip
        waits += json.loads(out.stdout.strip().splitlines()[-1])
        found = fatal_checks(logs)
    ok = sorted(w * 1000 for w in waits if w is not None)
    _common.report(
        "worker_churn",
        {
            "worker_starts": len(waits),
            "fatal_checks": len(found),
            "fatal_examples": [f["check"] for f in found[:3]],
            "registered": len(ok) / len(waits),
            "first_task_wait_ms_median": statistics.median(ok) if ok else -1.0,
            "first_task_wait_ms_p95": ok[int(0.95 * (len(ok) - 1))] if ok else -1.0,
        },
        {"fatal_checks": 0},
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--job"]:
        job(sys.argv[2], int(sys.argv[3]))
    else:
        main()
