"""Benchmark: from a worker reaching a cluster breakpoint to the editor showing the line with its
variables (issue 27), leg by leg, against debugpy's own stop-to-stackTrace in the same run.

Through Ray Sleuth, per hit (a cluster breakpoint `[actor Hitter]` on a line right after the
worker notes `time.time()`):
  hit_to_event   the worker reaches the line -> the `workers` stream event showing it paused
                 arrives (what the extension waits for; the agent's report crosses the registry
                 and the broker on the way)
  attach         that event -> a DAP session through the broker has its `stopped` event
                 (initialize, attach, configurationDone; the worker's debugpy listener opens
                 lazily at the stop)
  inspect        `stopped` -> stackTrace, scopes and variables of the top frame answered
  whole          the sum: the hit -> the editor has the line and its variables
The first hit is cold (the worker's debugpy listener opens at that stop; the broker's link then
stays open), reported apart as whole_ms_first_hit; the medians are over all hits.
Straight: a worker without the agent in `breakpoint()` under Ray's own debugpy (RAY_DEBUG's
path), found by polling the broker's table, attached straight to its listener, to its first
stackTrace (straight_whole); straight_attach is debugpy's own part of it: connect, initialize,
attach, configurationDone, `stopped`, stackTrace.
Prints one JSON line: median and p90 (ms) of each leg and of both wholes; target: whole median
<= 300 ms.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import threading
import time

import _common  # first: it pins Ray's env before ray is imported
import ray
from attach_latency import ray_debugger_port, straight_session, wait_paused, wait_running

from raysleuth.client import BrokerClient
from raysleuth.dap.client import open_session

os.environ["RAYSLEUTH"] = "1"  # workers the cluster starts inherit it

HITS = int(os.environ.get("BENCH_HITS", "20"))
FILE = os.path.abspath(__file__)


class Hitter:
    def pid(self) -> int:
        return os.getpid()

    def hit(self, tag: int) -> int:
        t_hit = time.time()
        x = tag + int(t_hit * 0)  # @line hit
        return x

    def pause(self, tag: int) -> int:
        t_hit = time.time()  # noqa: F841 - read by the bench through debugpy
        breakpoint()
        return tag


def line_of(tag: str) -> int:
    with open(FILE) as f:
        return next(i for i, text in enumerate(f, 1) if text.rstrip().endswith(f"# @line {tag}"))


class PausedEvents:
    """Arrival times of `workers` stream events that show a given pid paused."""

    def __init__(self, client: BrokerClient) -> None:
        self.client = client
        self.seen: dict[int, list[float]] = {}
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for _event, data in self.client.events(names={"workers"}, timeout=600):
            now = time.time()
            rows = data if isinstance(data, list) else data.get("workers", [])
            with self._lock:
                for w in rows:
                    if w.get("state") == "paused" and w.get("pid") is not None:
                        self.seen.setdefault(w["pid"], []).append(now)

    def first_after(self, pid: int, t: float, timeout: float = 30.0) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                times = [x for x in self.seen.get(pid, []) if x >= t]
            if times:
                return times[0]
            time.sleep(0.002)
        raise TimeoutError(f"no paused event for pid {pid}")


async def inspect_top(c, tid: int) -> int:
    st = await c.request("stackTrace", {"threadId": tid})
    frame = st["body"]["stackFrames"][0]["id"]
    sc = await c.request("scopes", {"frameId": frame})
    await c.request("variables", {"variablesReference": sc["body"]["scopes"][0]["variablesReference"]})
    return frame


def armed_in(client: BrokerClient, pid: int, timeout: float = 30.0) -> None:
    """Until the worker reports the breakpoint armed (a PUT reaches live workers within a heartbeat)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(w.get("pid") == pid for b in client.get("/v1/breakpoints") for w in b.get("armed_on") or ()):
            return
        time.sleep(0.02)
    raise TimeoutError(f"the breakpoint never armed in pid {pid}")


async def t_hit_of(c, frame: int) -> float:
    ev = await c.request("evaluate", {"expression": "t_hit", "frameId": frame, "context": "repl"})
    return float(ev["body"]["result"])


async def let_go(c, tid: int, ref, tag: int, client: BrokerClient, pid: int) -> None:
    """Continue the stopped worker, end the session, and wait until it runs again."""
    await c.request("continue", {"threadId": tid})
    await c.request("disconnect", {})
    await c.close()
    assert await ref == tag
    await asyncio.to_thread(wait_running, client, pid)


async def via_broker(broker, client: BrokerClient, events: PausedEvents) -> dict:
    host, port = broker.ready["dap"].rsplit(":", 1)
    a = ray.remote(num_cpus=1)(Hitter).remote()
    pid = await a.pid.remote()
    legs: dict[str, list[float]] = {"hit_to_event": [], "attach": [], "inspect": [], "whole": []}
    client.set_breakpoints(FILE, [{"line": line_of("hit"), "condition": "[actor Hitter]"}])
    armed_in(client, pid)
    try:
        for i in range(HITS):
            since = time.time()
            ref = a.hit.remote(i)
            t_event = await asyncio.to_thread(events.first_after, pid, since)
            w = next(w for w in client.workers() if w["pid"] == pid)
            c = await open_session(host, int(port), {"token": broker.token, "worker": w["id"]})
            ev = await c.wait_event("stopped", timeout=60)
            t_stopped = time.time()
            tid = ev["body"]["threadId"]
            frame = await inspect_top(c, tid)
            t_vars = time.time()
            t_hit = await t_hit_of(c, frame)
            legs["hit_to_event"].append(t_event - t_hit)
            legs["attach"].append(t_stopped - t_event)
            legs["inspect"].append(t_vars - t_stopped)
            legs["whole"].append(t_vars - t_hit)
            await let_go(c, tid, ref, i, client, pid)
    finally:
        client.set_breakpoints(FILE, [])
        ray.kill(a)
    return legs


async def straight(client: BrokerClient) -> tuple[list[float], list[float]]:
    a = ray.remote(num_cpus=1)(Hitter).options(runtime_env={"env_vars": {"RAYSLEUTH": "0"}}).remote()
    pid = await a.pid.remote()
    out, attach = [], []
    try:
        for i in range(HITS):
            ref = a.pause.remote(i)
            w = await asyncio.to_thread(wait_paused, client, lambda w: w["pid"] == pid)
            c, dt, tid = await straight_session(w["node_ip"], ray_debugger_port(w["id"]))
            attach.append(dt)
            t_trace = time.time()
            st = await c.request("stackTrace", {"threadId": tid})
            frames = st["body"]["stackFrames"]
            top = next(f for f in frames if f["name"] == "pause")
            t_hit = await t_hit_of(c, top["id"])
            out.append(t_trace - t_hit)
            await let_go(c, tid, ref, i, client, pid)
    finally:
        ray.kill(a)
    return out, attach


def ms(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))] * 1e3


def main() -> None:
    with _common.cluster_with_broker() as broker:
        client = BrokerClient(broker.http, broker.token)
        events = PausedEvents(client)
        legs = asyncio.run(via_broker(broker, client, events))
        base, base_attach = asyncio.run(straight(client))
    result: dict = {"hits": HITS, "whole_ms_first_hit": legs["whole"][0] * 1e3}
    for name, xs in legs.items():
        result[f"{name}_ms_median"] = statistics.median(xs) * 1e3
        result[f"{name}_ms_p90"] = ms(xs, 0.9)
    result["straight_whole_ms_median"] = statistics.median(base) * 1e3
    result["straight_whole_ms_p90"] = ms(base, 0.9)
    result["straight_attach_ms_median"] = statistics.median(base_attach) * 1e3
    result["whole_ratio"] = statistics.median(legs["whole"]) / statistics.median(base)
    _common.report("hit_to_editor", result, {"whole_ms_median": 300.0})


if __name__ == "__main__":
    main()
