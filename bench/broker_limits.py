"""Benchmark: the broker under a hostile crowd (#23), against itself quiet, in one run.

While 1,000 connections that never speak, 200 event-stream clients that never read and a stream
of bad DAP frames hit the broker (and the cluster set changes, so the streams have events to
send), `GET /v1/workers` is timed and the broker's RSS sampled. Prints one JSON line:
  p50_ms_quiet, p99_ms_quiet     GET /v1/workers, nothing else going on
  p50_ms_loaded, p99_ms_loaded   the same under the crowd
  p99_ratio                      loaded / quiet (target <= 2)
  rss_added_mb                   broker RSS peak under the crowd minus quiet (target <= 100)
  connections_left               broker connections still open once the crowd left, beyond the
                                 quiet count (target 0)
  crowd_closed_by_broker          crowd connections the broker had closed by the end (silent ones
                                 after 10 s, the oldest beyond 1,000, stream clients that fell behind)
Then two floods of #37, each while `GET /v1/hello` (a new connection each) is timed against the
same request quiet, and the broker's RSS against quiet:
  dap_flood_*    DAP clients that send requests before any attach (`threads`, and `on`, which the
                 old dispatcher turned into a recursion) as fast as they can and never read,
                 coming back each time the broker drops them (after 64 requests):
                 hello_p99_ratio (target <= 2), rss_added_mb (target <= 100), connections_dropped
  half_sent_*    1,100 connections each holding a half-sent HTTP request (the head never ends):
                 hello_p99_ratio (<= 2), rss_added_mb (<= 100), max_connections (the broker's
                 own count of open client sockets, target <= 1,020: 1,000 + sockets it
                 closed that asyncio frees on its next turn),
                 closed_s (until the broker closed all of them: the header timeout, 10 s)
"""

from __future__ import annotations

import multiprocessing
import socket
import statistics
import threading
import time
from urllib.parse import urlsplit

import _common  # first: it pins Ray's env before ray is imported
import _floods as floods
import psutil

from raysleuth.client import BrokerClient
from raysleuth.shared.peer import check_broker_peer

IDLE, STREAMS, SAMPLES = 1000, 200, 1000


def timed_gets(client: BrokerClient, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        client.workers()
        out.append((time.perf_counter() - t) * 1e3)
    return out


def p99(xs: list[float]) -> float:
    return sorted(xs)[int(0.99 * (len(xs) - 1))]


def broker_connections(proc: psutil.Process, ports: set[int]) -> int:
    """Connections clients hold to the broker's own ports."""
    conns = proc.net_connections(kind="inet")
    return sum(c.status == psutil.CONN_ESTABLISHED and c.laddr.port in ports for c in conns)


def hostile_load(url: str, token: str, dap_host: str, dap_port: int) -> None:
    """Bad DAP frames (about 50 connections a second) and cluster-set changes (about 5 a
    second, so the streams that never read have events to fall behind on), until terminated."""
    client = BrokerClient(url, token)
    frames = [b"Content-Length: 99999999\r\n\r\n{", b"Content-Length: x\r\n\r\n", b"\xff" * 5000]
    i = 0
    while True:
        try:
            with socket.create_connection((dap_host, dap_port), timeout=2) as s:
                s.sendall(frames[i % len(frames)])
        except OSError:
            pass
        if i % 10 == 0:
            client.set_breakpoints("/bench/churn.py", [{"line": 1 + i % 50}])
        i += 1
        time.sleep(0.02)


def main() -> None:
    with _common.cluster_with_broker(num_cpus=2) as broker:
        proc = psutil.Process(broker.proc.pid)
        client = BrokerClient(broker.http, broker.token)
        http = urlsplit(broker.http)
        dap_host, dap_port = broker.ready["dap"].rsplit(":", 1)
        ports = {http.port, int(dap_port)}
        client.workers()
        quiet = timed_gets(client, SAMPLES)
        rss_quiet, conns_quiet = proc.memory_info().rss, broker_connections(proc, ports)

        doors = [(dap_host, int(dap_port)), (http.hostname, http.port)]
        crowd = [socket.create_connection(doors[i % 2]) for i in range(IDLE)]
        stream = f"GET /v1/stream HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {broker.token}\r\n\r\n"
        for _ in range(STREAMS):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # and it never reads
            s.connect((http.hostname, http.port))
            check_broker_peer(s, broker.http)  # the token goes to a broker process of ours only (#37)
            s.sendall(stream.encode())
            crowd.append(s)
        # The frames and the churn come from a process of their own (not this one's GIL).
        load = multiprocessing.get_context("spawn").Process(
            target=hostile_load, args=(broker.http, broker.token, dap_host, int(dap_port)), daemon=True
        )
        load.start()
        stop = threading.Event()
        peak = [proc.memory_info().rss]

        def sample() -> None:
            while not stop.wait(0.2):
                peak.append(proc.memory_info().rss)

        sampling = threading.Thread(target=sample, daemon=True)
        sampling.start()
        loaded = timed_gets(client, SAMPLES)
        closed = 0
        for s in crowd:
            s.setblocking(False)
            try:
                closed += s.recv(1) == b""
            except OSError:
                pass
        stop.set()
        load.terminate()
        load.join(10)
        sampling.join(10)
        for s in crowd:
            s.close()
        deadline = time.monotonic() + 30
        while broker_connections(proc, ports) > conns_quiet and time.monotonic() < deadline:
            time.sleep(0.2)  # the broker notices the closed sockets
        left = max(0, broker_connections(proc, ports) - conns_quiet)
        client.set_breakpoints("/bench/churn.py", [])
        more = floods.measure(broker, proc, ports)
    _common.report(
        "broker_limits",
        {
            "p50_ms_quiet": statistics.median(quiet),
            "p99_ms_quiet": p99(quiet),
            "p50_ms_loaded": statistics.median(loaded),
            "p99_ms_loaded": p99(loaded),
            "p99_ratio": p99(loaded) / p99(quiet),
            "rss_mb_quiet": rss_quiet / 2**20,
            "rss_added_mb": (max(peak) - rss_quiet) / 2**20,
            "connections_left": left,
            "crowd_closed_by_broker": closed,
            **more,
        },
        {"p99_ratio": 2.0, "rss_added_mb": 100.0, "connections_left": 0, **floods.TARGETS},
    )


if __name__ == "__main__":
    main()
