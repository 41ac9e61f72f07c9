"""Benchmark: what the broker and the node relay add to debugging a worker.

Prints one JSON line:
  attach_ratio        attach-to-stopped through broker + relay / straight to the worker's debugpy
                      (connect, initialize, attach, configurationDone, stopped, stackTrace); <= 1.2
  stacktrace_added_ms median stackTrace round trip through broker + relay minus straight; <= 5
Both sides attach to workers paused in plain breakpoint(): the "straight" worker has no agent,
so Ray's own debugpy listener is reached directly, as Ray's VS Code extension does.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time

import _common  # first: it pins Ray's env before ray is imported
import ray

from raysleuth.client import BrokerClient
from raysleuth.dap.client import DapClient, open_session

os.environ["RAYSLEUTH"] = "1"  # workers the cluster starts inherit it

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
TRACES = int(os.environ.get("BENCH_TRACES", "40"))


class Pauser:
    def pid(self) -> int:
        return os.getpid()

    def pause(self, tag: int) -> int:
        x = tag
        breakpoint()
        return x


async def straight_session(host: str, port: int) -> tuple[DapClient, float, int]:
    t = time.perf_counter()
    c = await DapClient.connect(host, port)
    await c.request("initialize", {"adapterID": "debugpy", "linesStartAt1": True, "pathFormat": "path"})
    attach = await c.send_request("attach", {"justMyCode": False})
    await c.wait_event("initialized", timeout=60)
    await c.request("configurationDone", {})
    await asyncio.wait_for(attach, 60)
    ev = await c.wait_event("stopped", timeout=60)
    tid = ev["body"]["threadId"]
    await c.request("stackTrace", {"threadId": tid})
    return c, time.perf_counter() - t, tid


async def broker_session(host: str, port: int, token: str, worker: str) -> tuple[DapClient, float, int]:
    t = time.perf_counter()
    c = await open_session(host, port, {"token": token, "worker": worker})
    ev = await c.wait_event("stopped", timeout=60)
    tid = ev["body"]["threadId"]
    await c.request("stackTrace", {"threadId": tid})
    return c, time.perf_counter() - t, tid


async def trace_times(c: DapClient, tid: int) -> list[float]:
    out = []
    for _ in range(TRACES):
        t = time.perf_counter()
        await c.request("stackTrace", {"threadId": tid})
        out.append(time.perf_counter() - t)
    return out


def wait_paused(client: BrokerClient, pid_filter, timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for w in client.workers():
            if w["state"] == "paused" and pid_filter(w):
                return w
        time.sleep(0.05)
    raise TimeoutError("no paused worker")


def ray_debugger_port(worker_id: str) -> int:
    from ray._raylet import WorkerID

    return ray._private.state.get_worker_debugger_port(WorkerID.from_hex(worker_id))  # noqa: SLF001


async def one_side(agent: bool, attach, client: BrokerClient, i: int, times: dict, traces: list) -> None:
    """A fresh worker paused twice: the first attach is cold, the second warm."""
    actor = ray.remote(num_cpus=1)(Pauser).options(
        runtime_env={"env_vars": {"RAYSLEUTH": "1" if agent else "0"}}
    )
    a = actor.remote()
    pid = await a.pid.remote()
    for kind in ("cold", "warm"):
        ref = a.pause.remote(i)
        w = await asyncio.to_thread(wait_paused, client, lambda w: w["pid"] == pid)
        c, dt, tid = await attach(w)
        times[kind].append(dt)
        traces.extend(await trace_times(c, tid))
        await c.request("continue", {"threadId": tid})
        await c.request("disconnect", {})
        await c.close()
        assert await ref == i
        # Wait until the table no longer shows it paused, so the next round sees the new pause.
        await asyncio.to_thread(wait_running, client, pid)
    ray.kill(a)


def wait_running(client: BrokerClient, pid: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(w["state"] != "paused" for w in client.workers() if w["pid"] == pid):
            return
        time.sleep(0.05)
    raise TimeoutError("worker still paused")


async def run(broker, client: BrokerClient) -> dict:
    bhost, bport = broker.ready["dap"].rsplit(":", 1)

    async def via_broker(w):
        return await broker_session(bhost, int(bport), broker.token, w["id"])

    async def straight(w):
        return await straight_session(w["node_ip"], ray_debugger_port(w["id"]))

    tb, ts = {"cold": [], "warm": []}, {"cold": [], "warm": []}
    trb, trs = [], []
    for i in range(ROUNDS):
        await one_side(True, via_broker, client, i, tb, trb)
        await one_side(False, straight, client, i, ts, trs)
    med = statistics.median
    return {
        "attach_s_broker_cold": med(tb["cold"]),
        "attach_s_straight_cold": med(ts["cold"]),
        "attach_ratio": med(tb["cold"]) / med(ts["cold"]),
        "attach_s_broker_warm": med(tb["warm"]),
        "attach_s_straight_warm": med(ts["warm"]),
        "attach_ratio_warm": med(tb["warm"]) / med(ts["warm"]),
        "stacktrace_ms_broker_median": med(trb) * 1e3,
        "stacktrace_ms_straight_median": med(trs) * 1e3,
        "stacktrace_added_ms": (med(trb) - med(trs)) * 1e3,
    }


def main() -> None:
    with _common.cluster_with_broker() as broker:
        client = BrokerClient(broker.http, broker.token)
        result = {"rounds": ROUNDS, **asyncio.run(run(broker, client))}
        _common.report("attach_latency", result, {"attach_ratio": 1.2, "stacktrace_added_ms": 5})


if __name__ == "__main__":
    main()
