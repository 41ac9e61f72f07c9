"""Benchmark: one broker under 1,000 simulated agents (issue #16, scale by simulation).

The agents live in a few async Ray actors (BENCH_PROCS processes, BENCH_AGENTS agents in all)
and speak the real registry protocol, as agent/core.py does: `heartbeat(report, wait)` every
HEARTBEAT_S, which long-polls for commands; a new point set comes back as a `breakpoints`
command, is "armed" at once (every point: the file is taken to be loaded) and reported
straight away with `armed` and `bp_version` (the agent's poke). Prints one JSON line:
  list_p50_ms, list_p99_ms  GET /v1/workers at 1,000 workers (target p50 <= 50 ms)
  sse_fanout_ms             a worker's report changes -> all 10 stream clients got the
                            `workers` event that shows it (median of 5; max over clients)
  put_to_armed_s            PUT /v1/breakpoints -> GET /v1/breakpoints says armed on all
  broker_kb_per_worker      broker RSS with the agents minus before them, per agent
                            (target <= 50 KB)
  registry_cpu_us_per_beat  the registry actor's CPU time per heartbeat, over a steady window
  broker_cpu_us_per_beat    the broker's CPU time per heartbeat, same window
  registry_calls_per_beat   calls the registry took per heartbeat in that window (1: the
                            heartbeat is the report and the long poll in one call)
Absolute times and sizes, marked as such: there is no baseline to divide by.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import statistics
import threading
import time
from urllib.parse import urlsplit

import _common  # first: it pins Ray's env before ray is imported
import psutil
import ray

from raysleuth.client import CheckedHTTPConnection
from raysleuth.shared.peer import check_broker_peer

AGENTS = int(os.environ.get("BENCH_AGENTS", "1000"))
PROCS = int(os.environ.get("BENCH_PROCS", "4"))
HEARTBEAT_S = float(os.environ.get("RAYSLEUTH_HEARTBEAT_S", "2.0"))
LIST_REQUESTS = int(os.environ.get("BENCH_LIST_REQUESTS", "100"))
STREAM_CLIENTS = 10
NODES = 8
"""Simulated nodes the agents are spread over (ids only: the broker never calls them)."""
PREFIX = "5105"
"""Every simulated worker id starts with this (hex, 56 characters like Ray's)."""


@ray.remote(num_cpus=0, max_concurrency=100_000)
class SimAgents:
    """A process full of simulated agents, each one coroutine doing the agent thread's loop."""

    def __init__(self, first: int, count: int) -> None:
        from raysleuth.shared import names

        self.registry = ray.get_actor(names.REGISTRY_ACTOR, namespace=names.NAMESPACE)
        self.infos = [report_of(first + i) for i in range(count)]
        self.beats = 0
        self.calls = 0
        self.stopping = False
        self.tasks: list = []

    async def start(self) -> int:
        import random

        async def one(info: dict) -> None:
            await asyncio.sleep(random.random() * HEARTBEAT_S)  # workers start over a while
            wait = 0.0  # the first heartbeat answers at once, as the real agent's does
            while not self.stopping:
                info["time"] = time.time()
                commands = await self.registry.heartbeat.remote(info, wait)
                self.beats += 1
                self.calls += 1
                wait = HEARTBEAT_S
                for c in commands:
                    if c.get("op") == "breakpoints":
                        info["bp_version"] = c.get("version", "")
                        info["armed"] = sorted(p["id"] for p in c.get("points") or [])
                        info["time"] = time.time()
                        await self.registry.report.remote(info)  # the agent's poke after arming
                        self.calls += 1
                    elif "id" in c:
                        await self.registry.command_result.remote(c["id"], {"ok": True})
                        self.calls += 1

        self.tasks = [asyncio.ensure_future(one(info)) for info in self.infos]
        return len(self.tasks)

    async def counts(self) -> tuple[int, int]:
        return self.beats, self.calls

    async def rename(self, i: int, name: str) -> None:
        """One agent's worker changes (its actor name): reported at once, like a poke."""
        info = self.infos[i]
        info["actor_name"] = name
        info["time"] = time.time()
        await self.registry.report.remote(info)

    async def stop(self) -> None:
        self.stopping = True
        for t in self.tasks:
            t.cancel()


def report_of(i: int) -> dict:
    """What agent/reporting.py's build_report sends for an idle actor worker."""
    node = i % NODES
    return {
        "id": PREFIX + format(i, "052x"),
        "pid": 100_000 + i,
        "node_id": format(node, "056x"),
        "node_ip": f"10.0.0.{node + 1}",
        "job_id": "01000000",
        "python": "3.11.7",
        "driver": False,
        "fault_file": f"/tmp/ray/session/logs/raysleuth-fault-{100_000 + i}.log",
        "actor_id": format(i, "032x"),
        "actor_class": "Trainer",
        "actor_name": None,
        "rank": i,
        "local_rank": i // NODES,
        "world_size": AGENTS,
        "rank_source": "env",
        "gpu_ids": [],
        "state": "running",
        "agent_source": "env",
        "bp_version": "",
        "armed": [],
        "trigger": "monitoring",
        "cwd": "/home/ray/job",
        "gpu": None,
        "time": time.time(),
    }


class Http:
    """A keep-alive client for the broker's API."""

    def __init__(self, url: str, token: str) -> None:
        parts = urlsplit(url)
        self.conn = CheckedHTTPConnection(parts.hostname, parts.port, timeout=60)  # a broker of ours
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def call(self, method: str, path: str, body=None):
        self.conn.request(method, path, json.dumps(body) if body is not None else None, self.headers)
        resp = self.conn.getresponse()
        data = resp.read()
        assert resp.status == 200, (resp.status, data[:300])
        return json.loads(data)


class StreamClient(threading.Thread):
    """One /v1/stream client that notes when each awaited marker first shows up."""

    def __init__(self, url: str, token: str) -> None:
        super().__init__(daemon=True)
        parts = urlsplit(url)
        self.sock = socket.create_connection((parts.hostname, parts.port))
        check_broker_peer(self.sock, url)  # the token goes to a broker process of ours only (#37)
        self.sock.sendall(
            f"GET /v1/stream HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n".encode()
        )
        self.wanted: set[bytes] = set()
        self.seen: dict[bytes, float] = {}
        self.lock = threading.Lock()

    def run(self) -> None:
        tail = b""
        while True:
            data = self.sock.recv(1 << 20)
            if not data:
                return
            now = time.perf_counter()
            buf = tail + data
            with self.lock:
                for m in [m for m in self.wanted if m in buf]:
                    self.seen[m] = now
                    self.wanted.discard(m)
            tail = buf[-64:]

    def want(self, marker: bytes) -> None:
        with self.lock:
            self.wanted.add(marker)


def wait_for(cond, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (res := cond()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} within {timeout} s")
        time.sleep(0.05)
    return res


def cpu_s(pid: int) -> float:
    t = psutil.Process(pid).cpu_times()
    return t.user + t.system


def main() -> None:
    from ray.util.state import list_actors

    with _common.cluster_with_broker() as broker:
        api = Http(broker.http, broker.token)
        bpid = broker.proc.pid

        def sim_count() -> int:
            return sum(1 for w in api.call("GET", "/v1/workers") if w["id"].startswith(PREFIX))

        for _ in range(20):
            api.call("GET", "/v1/workers")
        rss0 = psutil.Process(bpid).memory_info().rss
        per = -(-AGENTS // PROCS)
        env = {"env_vars": {"RAYSLEUTH": "0"}}
        sims = [
            SimAgents.options(runtime_env=env).remote(i * per, min(per, AGENTS - i * per))
            for i in range(PROCS)
        ]
        ray.get([s.start.remote() for s in sims])
        wait_for(lambda: sim_count() >= AGENTS, 120, f"{AGENTS} workers listed")
        time.sleep(3 * HEARTBEAT_S)  # a benchmark's settling: a few heartbeat rounds go by

        # GET /v1/workers at 1,000 workers, while they heartbeat.
        lat = []
        for _ in range(LIST_REQUESTS):
            t0 = time.perf_counter()
            rows = api.call("GET", "/v1/workers")
            lat.append((time.perf_counter() - t0) * 1000)
        assert sum(1 for w in rows if w["id"].startswith(PREFIX)) >= AGENTS
        lat.sort()
        rss1 = psutil.Process(bpid).memory_info().rss

        # The registry's and the broker's load per heartbeat, over a steady window.
        # This cluster's address: another Ray instance on the machine makes "auto" ambiguous.
        ours = ray.get_runtime_context().gcs_address
        reg = [
            a
            for a in list_actors(address=ours, filters=[("class_name", "=", "SleuthRegistry")])
            if a.state == "ALIVE"
        ]
        rpid = reg[0].pid
        c0 = [ray.get(s.counts.remote()) for s in sims]
        r0, b0 = cpu_s(rpid), cpu_s(bpid)
        time.sleep(5 * HEARTBEAT_S)  # the measuring window itself
        r1, b1 = cpu_s(rpid), cpu_s(bpid)
        c1 = [ray.get(s.counts.remote()) for s in sims]
        beats = sum(b[0] for b in c1) - sum(b[0] for b in c0)
        calls = sum(b[1] for b in c1) - sum(b[1] for b in c0)

        # SSE fan-out: one worker changes; all 10 clients see it.
        clients = [StreamClient(broker.http, broker.token) for _ in range(STREAM_CLIENTS)]
        for c in clients:
            c.start()
        wait_for(lambda: api.call("GET", "/v1/status")["watchers"] >= STREAM_CLIENTS, 30, "10 stream clients")
        fanout = []
        for k in range(5):
            marker = f"fanout-marker-{k}".encode()
            for c in clients:
                c.want(marker)
            t0 = time.perf_counter()
            ray.get(sims[k % PROCS].rename.remote(k, marker.decode()))
            wait_for(lambda m=marker: all(m in c.seen for c in clients), 60, "the change on every client")
            fanout.append((max(c.seen[marker] for c in clients) - t0) * 1000)

        # PUT /v1/breakpoints -> armed on every agent.
        t0 = time.perf_counter()
        api.call(
            "PUT",
            "/v1/breakpoints",
            {"path": "/sim/train.py", "owner": "bench", "breakpoints": [{"line": 10}]},
        )

        def armed() -> bool:
            return any(
                b["armed"] >= AGENTS for b in api.call("GET", "/v1/breakpoints") if b["owner"] == "bench"
            )

        wait_for(armed, 120, "the breakpoint armed on all")
        put_to_armed = time.perf_counter() - t0
        ray.get([s.stop.remote() for s in sims])

    result = {
        "agents": AGENTS,
        "processes": PROCS,
        "list_p50_ms": statistics.median(lat),
        "list_p99_ms": lat[min(len(lat) - 1, int(len(lat) * 0.99))],
        "list_bytes": len(json.dumps(rows)),
        "sse_fanout_ms": statistics.median(fanout),
        "sse_fanout_max_ms": max(fanout),
        "put_to_armed_s": put_to_armed,
        "broker_kb_per_worker": (rss1 - rss0) / 1024 / AGENTS,
        "broker_rss_mb": rss1 / 2**20,
        "heartbeats_per_s": beats / (5 * HEARTBEAT_S),
        "registry_cpu_us_per_beat": (r1 - r0) / max(beats, 1) * 1e6,
        "broker_cpu_us_per_beat": (b1 - b0) / max(beats, 1) * 1e6,
        "registry_calls_per_beat": calls / max(beats, 1),
    }
    _common.report("registry_scale", result, {"list_p50_ms": 50.0, "broker_kb_per_worker": 50.0})


if __name__ == "__main__":
    main()
