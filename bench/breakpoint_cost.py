"""Benchmark: what an armed cluster breakpoint costs the workers it reaches, and the ones it doesn't.

Runs on the interpreter that runs it. Prints one JSON line of ratios against a baseline actor with
no agent, measured in the same run, interleaved (the same hot loop in every actor):
  out_of_scope_ratio     agent on, a breakpoint scoped to another rank            (target <= 1.02)
  in_scope_ratio         agent on, armed breakpoint in another function         (<= 1.05 on 3.11,
                                                                                  <= 1.02 on 3.12+)
  logpoint_ratio         agent on, an armed logpoint + snapshot point that never fire   (<= 1.05)
  settrace_ratio         for comparison: a global sys.settrace that ignores every frame
  baseline_spread        a second agent-less actor against the first: the noise floor
  false_condition_us     cost per pass of a false condition on a line inside the loop
  put_to_armed_s         PUT /v1/breakpoints until 8 workers report it armed (median, <= 1 s)
  after_stop_ratio       a worker that stopped once in debugpy, was continued and disarmed
                         (3.11: debugpy's tracer stays once listened; 3.12+: sys.monitoring)
  running_frame_ratio    the hot loop inside a call that was running when a point was armed in
                         that same function (on a line the loop does not pass): time per chunk
                         once armed / before (fastest chunk of each), in the same call (3.11: the tracer;
                         a worst case: one cheap arithmetic line per pass)
  running_frame_line_us  what each line the armed running frame executes costs more (3.11)
  running_frame_c_ratio  the same with a loop whose passes spend their time in C (~20 us each),
                         as a training step does in its tensor library
  running_after_return_ratio   that worker's loop once the armed frame returned, against the
                         baseline actor (the point still armed): the cost is gone (target <= 1.05)
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time

import _common  # first: it pins Ray's env before ray is imported

os.environ.setdefault("RAYSLEUTH_LINK_IDLE_S", "1")  # the broker's; the measured worker waits less
import ray

from raysleuth.client import BrokerClient
from raysleuth.dap.client import open_session

REPEATS = int(os.environ.get("BENCH_REPEATS", "7"))
LOOP_N = int(os.environ.get("BENCH_LOOP_N", "4000000"))
ARMED_WORKERS = 8
FILE = os.path.abspath(__file__)


@ray.remote(num_cpus=0)
class Looper:
    def __init__(self, rank: int | None) -> None:
        import raysleuth  # in every actor, agent or not: the same modules loaded everywhere

        if rank is not None:
            raysleuth.set_rank(rank)

    def pid(self) -> int:
        return os.getpid()

    def loop(self, n: int) -> float:
        t = time.perf_counter()
        s = 0
        for i in range(n):
            s += i * i % 7  # @line hot
        return time.perf_counter() - t

    def loop_for(self, seconds: float, n: int, c_work: int = 0) -> list[tuple[float, float]]:
        """The hot loop in one long call, timed per chunk of `n` passes: (end time, seconds).
        `c_work` > 0: each pass spends its time in C instead (a sum over that many ints), as a
        training step spends it in its tensor library."""
        out: list[tuple[float, float]] = []
        end = time.time() + seconds
        while time.time() < end:
            t = time.perf_counter()
            s = 0
            for i in range(n):
                s += sum(range(c_work)) if c_work else i * i % 7
            out.append((time.time(), time.perf_counter() - t))
        return out  # @line running-end

    def elsewhere(self, x: int) -> int:
        y = x + 1  # @line elsewhere
        return y

    def loop_settrace(self, n: int) -> float:
        sys.settrace(lambda frame, event, arg: None)
        try:
            return self.loop(n)
        finally:
            sys.settrace(None)


def line_of(tag: str) -> int:
    with open(FILE) as f:
        return next(i for i, text in enumerate(f, 1) if text.rstrip().endswith(f"# @line {tag}"))


HOT, ELSEWHERE, RUNNING_END = line_of("hot"), line_of("elsewhere"), line_of("running-end")


def env(agent: bool) -> dict:
    return {"env_vars": {"RAYSLEUTH": "1" if agent else "0"}}


def interleaved(calls: dict) -> dict[str, float]:
    """Min time of each named call, run one at a time, in rotating order."""
    names = list(calls)
    for fn in calls.values():
        ray.get(fn(LOOP_N // 10))  # warm up
    times: dict[str, list[float]] = {n: [] for n in names}
    for i in range(REPEATS):
        order = names[i % len(names) :] + names[: i % len(names)]
        for n in order:
            times[n].append(ray.get(calls[n](LOOP_N)))
    return {n: min(v) for n, v in times.items()}


def wait_armed(client: BrokerClient, line: int, n: int, timeout: float = 30) -> float:
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        if sum(b["armed"] for b in client.breakpoints() if b["line"] == line) >= n:
            return time.perf_counter() - t0
        time.sleep(0.01)
    raise RuntimeError(f"breakpoint at line {line} not armed on {n} workers within {timeout} s")


def armed_in(client: BrokerClient, pid: int) -> list:
    return next(w for w in client.workers() if w["pid"] == pid)["armed"]


def measure_ratios(client: BrokerClient) -> dict:
    base = Looper.options(runtime_env=env(False)).remote(None)
    base2 = Looper.options(runtime_env=env(False)).remote(None)
    tracer = Looper.options(runtime_env=env(False)).remote(None)  # its own: tracing leaves traces
    out = Looper.options(runtime_env=env(True)).remote(0)
    inside = Looper.options(runtime_env=env(True)).remote(1)
    logp = Looper.options(runtime_env=env(True)).remote(2)
    pids = ray.get([a.pid.remote() for a in (out, inside, logp)])
    deadline = time.time() + 30
    while time.time() < deadline and not all(
        any(w["pid"] == p and w["rank"] is not None for w in client.workers()) for p in pids
    ):
        time.sleep(0.1)
    client.set_breakpoints(
        FILE,
        [
            {"line": ELSEWHERE, "condition": "[rank 1] x > 0"},
            {"line": ELSEWHERE + 1, "logMessage": "never {y}", "ranks": [2]},
        ],
    )
    client.post("/v1/snapshots", {"path": FILE, "line": ELSEWHERE, "ranks": [2]})
    deadline = time.time() + 30
    while time.time() < deadline and not (armed_in(client, pids[1]) and len(armed_in(client, pids[2])) == 2):
        time.sleep(0.05)
    assert not armed_in(client, pids[0]), "the worker outside the scope must not be armed"
    assert armed_in(client, pids[1]) and len(armed_in(client, pids[2])) == 2, "armed in the scoped workers"
    t = interleaved(
        {
            "base": base.loop.remote,
            "base2": base2.loop.remote,
            "out": out.loop.remote,
            "inside": inside.loop.remote,
            "logp": logp.loop.remote,
            "settrace": tracer.loop_settrace.remote,
        }
    )
    # A false condition on a line inside the hot loop: the per-pass price of the trigger itself.
    client.set_breakpoints(FILE, [{"line": HOT, "condition": "[rank 1] i < 0"}])
    wait_armed(client, HOT, 1)
    n = LOOP_N // 10
    hot = min(ray.get(inside.loop.remote(n)) for _ in range(3))
    base_small = min(ray.get(base.loop.remote(n)) for _ in range(3))
    client.delete("/v1/breakpoints")
    for s in client.get("/v1/snapshots"):
        client.delete(f"/v1/snapshots/{s['id']}")
    for a in (base, base2, tracer, out, inside, logp):
        ray.kill(a)
    return {
        "loop_s_baseline": t["base"],
        "baseline_spread": t["base2"] / t["base"],
        "out_of_scope_ratio": t["out"] / t["base"],
        "in_scope_ratio": t["inside"] / t["base"],
        "logpoint_ratio": t["logp"] / t["base"],
        "settrace_ratio": t["settrace"] / t["base"],
        "false_condition_us": (hot - base_small) / n * 1e6,
    }


def measure_running_frame(client: BrokerClient) -> dict:
    """A point armed in a function while it runs: what its loop pays until the call returns."""
    base = Looper.options(runtime_env=env(False)).remote(None)
    running = Looper.options(runtime_env=env(True)).remote(1)
    pid = ray.get(running.pid.remote())
    deadline = time.time() + 30
    while time.time() < deadline and not any(w["pid"] == pid and w["rank"] == 1 for w in client.workers()):
        time.sleep(0.1)
    n = LOOP_N // 40
    ray.get(running.loop_for.remote(0.2, n))  # warm up
    slow, fast, _ = armed_while_running(client, running, pid, n, 0)
    c_slow, c_fast, _ = armed_while_running(client, running, pid, 50, 2000)
    t = interleaved({"base": base.loop.remote, "after": running.loop.remote})
    client.delete("/v1/breakpoints")
    ray.kill(base)
    ray.kill(running)
    return {
        "running_frame_ratio": slow / fast,
        # Two line events per pass of this loop (the `for` line, the body line).
        "running_frame_line_us": (slow - fast) / (2 * n) * 1e6,
        "running_frame_c_ratio": c_slow / c_fast,
        "running_after_return_ratio": t["after"] / t["base"],
    }


def armed_while_running(client: BrokerClient, actor, pid: int, n: int, c_work: int) -> tuple:
    """(fastest chunk once armed, fastest before, chunk counts) of one loop_for call armed midway."""
    client.delete("/v1/breakpoints")
    ref = actor.loop_for.remote(6.0, n, c_work)
    while next(w for w in client.workers() if w["pid"] == pid)["state"] != "running":
        time.sleep(0.01)
    time.sleep(1.5)  # chunks run unarmed first: the baseline of the same call
    client.set_breakpoints(FILE, [{"line": RUNNING_END, "condition": "[rank 1] out is None"}])
    wait_armed(client, RUNNING_END, 1)
    armed_at = time.time()
    chunks = ray.get(ref)
    before = [d for t, d in chunks if t < armed_at - 0.05]
    after = [d for t, d in chunks if t > armed_at + 0.5]
    return min(after), min(before), [len(before), len(after)]  # the best chunk: load only adds


def measure_put_to_armed(client: BrokerClient) -> dict:
    actors = [Looper.options(runtime_env=env(True)).remote(r) for r in range(ARMED_WORKERS)]
    pids = ray.get([a.pid.remote() for a in actors])
    deadline = time.time() + 30
    while time.time() < deadline and sum(1 for w in client.workers() if w["pid"] in pids) < ARMED_WORKERS:
        time.sleep(0.1)
    times = []
    for i in range(5):
        line = ELSEWHERE if i % 2 == 0 else ELSEWHERE + 1
        t0 = time.perf_counter()
        client.set_breakpoints(FILE, [{"line": line, "condition": f"x == {-i - 1}"}])
        wait_armed(client, line, ARMED_WORKERS)
        times.append(time.perf_counter() - t0)
    client.delete("/v1/breakpoints")
    for a in actors:
        ray.kill(a)
    return {"put_to_armed_s": statistics.median(times), "put_to_armed_max_s": max(times)}


async def _stop_once(broker, client: BrokerClient, actor, pid: int) -> None:
    client.set_breakpoints(FILE, [{"line": ELSEWHERE, "condition": "[rank 5]"}])
    wait_armed(client, ELSEWHERE, 1)
    ref = actor.elsewhere.remote(1)
    while next(w for w in client.workers() if w["pid"] == pid)["state"] != "paused":
        await asyncio.sleep(0.05)
    host, port = broker.ready["dap"].rsplit(":", 1)
    s = await open_session(host, int(port), {"token": broker.token, "rank": 5})
    stopped = await s.wait_event("stopped", timeout=30)
    client.delete("/v1/breakpoints")
    await s.request("continue", {"threadId": stopped["body"]["threadId"]})
    assert await asyncio.wait_for(ref, 30) == 2
    await s.request("disconnect", {}, check=False)
    await s.close()
    while client.get("/v1/status")["links"]:  # the broker closes the idle link (LINK_IDLE_S)
        await asyncio.sleep(0.1)


def measure_after_stop(broker, client: BrokerClient) -> dict:
    base = Looper.options(runtime_env=env(False)).remote(None)
    stopped = Looper.options(runtime_env=env(True)).remote(5)
    pid = ray.get(stopped.pid.remote())
    deadline = time.time() + 30
    while time.time() < deadline and not any(w["pid"] == pid and w["rank"] == 5 for w in client.workers()):
        time.sleep(0.1)
    asyncio.run(_stop_once(broker, client, stopped, pid))
    t = interleaved({"base": base.loop.remote, "after": stopped.loop.remote})
    ray.kill(base)
    ray.kill(stopped)
    return {"after_stop_ratio": t["after"] / t["base"]}


def main() -> None:
    with _common.cluster_with_broker() as broker:
        client = BrokerClient(broker.http, broker.token)
        result = {
            "ray": ray.__version__,
            "trigger": "monitoring" if sys.version_info >= (3, 12) else "rewrite",
        }
        result.update(measure_ratios(client))
        result.update(measure_put_to_armed(client))
        result.update(measure_running_frame(client))
        result.update(measure_after_stop(broker, client))
        in_scope_target = 1.02 if sys.version_info >= (3, 12) else 1.05
        _common.report(
            "breakpoint_cost",
            result,
            {
                "out_of_scope_ratio": 1.02,
                "in_scope_ratio": in_scope_target,
                "logpoint_ratio": 1.05,
                "put_to_armed_s": 1.0,
                "running_after_return_ratio": 1.05,
            },
        )


if __name__ == "__main__":
    main()
