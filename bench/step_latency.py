"""Benchmark: stepping in a stopped worker through the broker, against debugpy straight.

A worker stopped in `breakpoint()` 22 frames deep; a DAP client asks what the editor asks at each
step: stackTrace, scopes, variables, and `next` (request to the next `stopped` event). One side
goes through the broker's DAP port and the node relay to the agent's debugpy (TCP_NODELAY on);
the other straight to Ray's own debugpy listener of a worker without the agent (debugpy's default
sockets: what Ray's RAY_DEBUG path costs today). Prints one JSON line of medians (ms) and ratios;
target: median stackTrace through the broker <= 3 ms.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time

import _common  # first: it pins Ray's env before ray is imported
import ray
from attach_latency import broker_session, ray_debugger_port, straight_session, wait_paused, wait_running

from raysleuth.client import BrokerClient

os.environ["RAYSLEUTH"] = "1"  # workers the cluster starts inherit it

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
REQUESTS = int(os.environ.get("BENCH_REQUESTS", "30"))
STEPS = int(os.environ.get("BENCH_STEPS", "15"))
DEPTH = 20


class Stepper:
    def pid(self) -> int:
        return os.getpid()

    def dive(self, depth: int) -> int:
        if depth:
            return self.dive(depth - 1)
        total = 0
        breakpoint()
        for i in range(1000):
            total += i
        return total


async def timed(c, command: str, args: dict) -> tuple[float, dict]:
    t = time.perf_counter()
    res = await c.request(command, args)
    return time.perf_counter() - t, res


async def measure(c, tid: int, out: dict) -> None:
    for _ in range(REQUESTS):
        dt, st = await timed(c, "stackTrace", {"threadId": tid})
        out["stackTrace"].append(dt)
        frame = st["body"]["stackFrames"][0]["id"]
        dt, sc = await timed(c, "scopes", {"frameId": frame})
        out["scopes"].append(dt)
        ref = sc["body"]["scopes"][0]["variablesReference"]
        dt, _ = await timed(c, "variables", {"variablesReference": ref})
        out["variables"].append(dt)
    for _ in range(STEPS):
        t = time.perf_counter()
        await c.request("next", {"threadId": tid})
        ev = await c.wait_event("stopped", timeout=30)
        out["next"].append(time.perf_counter() - t)
        tid = ev["body"]["threadId"]
        await c.request("stackTrace", {"threadId": tid, "levels": 1})  # as an editor does
    await c.request("continue", {"threadId": tid})


async def one_side(agent: bool, attach, client: BrokerClient, out: dict) -> None:
    actor = ray.remote(num_cpus=1)(Stepper).options(
        runtime_env={"env_vars": {"RAYSLEUTH": "1" if agent else "0"}}
    )
    a = actor.remote()
    pid = await a.pid.remote()
    ref = a.dive.remote(DEPTH)
    w = await asyncio.to_thread(wait_paused, client, lambda w: w["pid"] == pid)
    c, _dt, tid = await attach(w)
    st = await c.request("stackTrace", {"threadId": tid})
    out["frames"].append(st["body"].get("totalFrames") or len(st["body"]["stackFrames"]))
    await measure(c, tid, out)
    await c.request("disconnect", {})
    await c.close()
    assert await ref == sum(range(1000))
    await asyncio.to_thread(wait_running, client, pid)
    ray.kill(a)


async def run(broker, client: BrokerClient) -> dict:
    bhost, bport = broker.ready["dap"].rsplit(":", 1)

    async def via_broker(w):
        return await broker_session(bhost, int(bport), broker.token, w["id"])

    async def straight(w):
        return await straight_session(w["node_ip"], ray_debugger_port(w["id"]))

    kinds = ("stackTrace", "scopes", "variables", "next")
    b = {k: [] for k in (*kinds, "frames")}
    s = {k: [] for k in (*kinds, "frames")}
    for _ in range(ROUNDS):  # interleaved, so both sides see the same machine
        await one_side(True, via_broker, client, b)
        await one_side(False, straight, client, s)
    med = statistics.median
    out: dict = {"frames": max(b["frames"])}
    for k in kinds:
        out[f"{k}_ms_broker"] = med(b[k]) * 1e3
        out[f"{k}_ms_straight"] = med(s[k]) * 1e3
        out[f"{k}_ratio"] = med(b[k]) / med(s[k])
    return out


def main() -> None:
    with _common.cluster_with_broker() as broker:
        client = BrokerClient(broker.http, broker.token)
        result = {"rounds": ROUNDS, **asyncio.run(run(broker, client))}
        _common.report("step_latency", result, {"stackTrace_ms_broker": 3.0, "next_ms_broker": 20.0})


if __name__ == "__main__":
    main()
