"""Benchmark: what a first-divergence watch (issue 26) costs a training step, and how soon its case
comes. Prints one JSON line of ratios measured in the same run:
  every_pass_ratio     a step over a 10M-element float32 array (a few in-place updates and a
                       reduction, as an optimizer step does) with a watch of that array armed at
                       every pass, over the same step with nothing armed, same worker, rounds
                       alternating (target <= 1.3)
  every_10th_ratio     the same with `every: 10` (target <= 1.05), over twice the rounds: its
                       ~2% sits inside this machine's round-to-round spread
  step_ms              the step without a watch (information)
  case_after_s         from the diverging pass (the workers' step call returning) to its case in
                       GET /v1/cases, median over the trials (target <= 1 s)
Four ranked workers; rank 2 drifts at a known pass for the case timing.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

import _common  # first: it pins Ray's env before ray is imported
import ray

from raysleuth.client import BrokerClient

N = 10_000_000
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "8"))
STEPS = int(os.environ.get("BENCH_STEPS", "20"))
FILE = os.path.abspath(__file__)


@ray.remote(num_cpus=0)
class Stepper:
    def __init__(self, rank: int) -> None:
        import numpy as np

        import raysleuth

        raysleuth.set_rank(rank, world_size=4)
        self.rank = rank
        self.grad = np.random.default_rng(0).standard_normal(N, dtype=np.float32)  # the same on every rank
        self.weights = np.zeros(N, dtype=np.float32)
        self.drift_at = -1

    def pid(self) -> int:
        return os.getpid()

    def drift(self, at: int) -> None:
        self.drift_at = at

    def steps(self, first: int, count: int) -> float:
        t0 = time.perf_counter()
        for step in range(first, first + count):
            self.one(step)
        return time.perf_counter() - t0

    def one(self, step: int) -> float:
        grad = self.grad
        grad *= 0.999
        grad += 0.001
        if step == self.drift_at:
            grad[0] += 1e-3
        self.weights -= 0.01 * grad
        return float(grad.sum())  # @line watch


def line_of(tag: str) -> int:
    with open(FILE) as f:
        return next(i for i, text in enumerate(f, 1) if text.rstrip().endswith(f"# @line {tag}"))


LINE = line_of("watch")


def armed_everywhere(client: BrokerClient, wid: str, pids: list[int], timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if all(wid in next((w["armed"] for w in client.workers() if w["pid"] == p), []) for p in pids):
            return
        time.sleep(0.05)
    raise RuntimeError(f"watch {wid} not armed on {len(pids)} workers within {timeout} s")


def timed(actors, first: int) -> float:
    return max(ray.get([a.steps.remote(first, STEPS) for a in actors]))


def ratio_with(client: BrokerClient, actors, pids, extra: dict, rounds: int = ROUNDS) -> tuple[float, float]:
    """Median over `rounds` of (steps with the watch armed) / (steps without), same workers."""
    ratios, plain = [], []
    step = 0
    for _ in range(rounds):
        base = timed(actors, step)
        step += STEPS
        wid = client.post("/v1/watches", {"path": FILE, "line": LINE, "expressions": ["grad"], **extra})["id"]
        armed_everywhere(client, wid, pids)
        watched = timed(actors, step)
        step += STEPS
        client.delete(f"/v1/watches/{wid}")
        ratios.append(watched / base)
        plain.append(base / STEPS)
    return statistics.median(ratios), statistics.median(plain) * 1e3


def case_after(client: BrokerClient, actors, pids) -> float:
    """Seconds from the diverging pass to its case, median of 3 trials."""
    out = []
    for trial in range(3):
        wid = client.post("/v1/watches", {"path": FILE, "line": LINE, "expressions": ["grad"]})["id"]
        armed_everywhere(client, wid, pids)
        ray.get([a.steps.remote(0, 3) for a in actors])  # passes 1-3 agree
        ray.get(actors[2].drift.remote(3))
        ray.get([a.steps.remote(3, 1) for a in actors])  # pass 4: rank 2 differs
        t0 = time.perf_counter()
        while not client.get(f"/v1/watches/{wid}")["divergence"]:
            if time.perf_counter() - t0 > 30:
                raise RuntimeError(f"no divergence case for {wid} within 30 s (trial {trial})")
            time.sleep(0.01)
        out.append(time.perf_counter() - t0)
        ray.get(actors[2].drift.remote(-1))
        client.delete(f"/v1/watches/{wid}")
    return statistics.median(out)


def main() -> None:
    with _common.cluster_with_broker(num_cpus=4) as broker:
        client = BrokerClient(broker.http, broker.token)
        actors = [Stepper.options(runtime_env={"env_vars": {"RAYSLEUTH": "1"}}).remote(r) for r in range(4)]
        pids = ray.get([a.pid.remote() for a in actors])
        ray.get([a.steps.remote(0, 2) for a in actors])  # warm up
        every, step_ms = ratio_with(client, actors, pids, {})
        tenth, _ = ratio_with(client, actors, pids, {"every": 10}, rounds=2 * ROUNDS)
        after = case_after(client, actors, pids)
    _common.report(
        "watch_cost",
        {"every_pass_ratio": every, "every_10th_ratio": tenth, "step_ms": step_ms, "case_after_s": after},
        {"every_pass_ratio": 1.3, "every_10th_ratio": 1.05, "case_after_s": 1.0},
    )


if __name__ == "__main__":
    sys.exit(main())
