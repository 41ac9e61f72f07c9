"""The floods of issue #37, for bench/broker_limits.py: each runs while `GET /v1/hello` (a new
connection each time, as a client that proves the broker does) is timed and the broker's RSS
sampled, against the same measured quiet in the same run."""

from __future__ import annotations

import json
import multiprocessing
import select
import socket
import threading
import time
from urllib.parse import urlsplit

import psutil

HELLO_SAMPLES = 1000
HALF_SENT = 1100
TARGETS = {
    "dap_flood_hello_p99_ratio": 2.0,
    "dap_flood_rss_added_mb": 100.0,
    "half_sent_hello_p99_ratio": 2.0,
    "half_sent_rss_added_mb": 100.0,
    "half_sent_max_connections": 1020.0,
    "half_sent_closed_s": 15.0,
}
"""Upper bounds: hello p99 at most 2x quiet, RSS at most +100 MB, at most 1,000 open client
connections (+ what the broker already closed and asyncio frees on its next turn), every
half-sent request closed by the header timeout (10 s) and some slack."""


def hello_times(host: str, port: int, n: int) -> list[float]:
    request = b"GET /v1/hello?nonce=%s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % (b"ab" * 16)
    out = []
    for _ in range(n):
        t = time.perf_counter()
        with socket.create_connection((host, port), timeout=10) as s:
            s.sendall(request)
            got = b""
            while chunk := s.recv(65536):
                got += chunk
        assert got.startswith(b"HTTP/1.1 200"), got[:100]
        out.append((time.perf_counter() - t) * 1e3)
    return out


def p99(xs: list[float]) -> float:
    return sorted(xs)[int(0.99 * (len(xs) - 1))]


def dap_flood(host: str, port: int, counter) -> None:
    """Requests before any attach, never read; again on a new connection each time the broker
    drops this one. Until terminated."""
    cmds = ["threads", "on"]  # `on`: the old dispatcher's recursion
    bodies = [json.dumps({"seq": i, "type": "request", "command": cmds[i % 2]}) for i in range(500)]
    frames = b"".join(b"Content-Length: %d\r\n\r\n%s" % (len(b), b.encode()) for b in bodies)
    while True:
        try:
            with socket.create_connection((host, port), timeout=5) as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                while True:
                    s.sendall(frames)
        except OSError:
            with counter.get_lock():
                counter.value += 1


class Sampler:
    """The broker's RSS peak and open client connections, every 0.1 s in a thread."""

    def __init__(self, proc: psutil.Process, ports: set[int]) -> None:
        self.proc, self.ports = proc, ports
        self.rss, self.conns = [proc.memory_info().rss], [0]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            self.rss.append(self.proc.memory_info().rss)
            conns = self.proc.net_connections(kind="inet")
            mine = [c for c in conns if c.status != psutil.CONN_LISTEN and c.laddr.port in self.ports]
            self.conns.append(len(mine))

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(10)


def measure(broker, proc: psutil.Process, ports: set[int]) -> dict:
    http = urlsplit(broker.http)
    dap_host, dap_port = broker.ready["dap"].rsplit(":", 1)
    hello_times(http.hostname, http.port, 30)  # warm
    quiet = hello_times(http.hostname, http.port, HELLO_SAMPLES)
    rss_quiet = proc.memory_info().rss
    out = {"hello_p50_ms_quiet": sorted(quiet)[len(quiet) // 2], "hello_p99_ms_quiet": p99(quiet)}

    counter = multiprocessing.get_context("spawn").Value("i", 0)
    flood = multiprocessing.get_context("spawn").Process(
        target=dap_flood, args=(dap_host, int(dap_port), counter), daemon=True
    )
    flood.start()
    with Sampler(proc, ports) as sampler:
        while counter.value < 3:  # the flood is on
            time.sleep(0.05)
        loaded = hello_times(http.hostname, http.port, HELLO_SAMPLES)
    flood.terminate()
    flood.join(10)
    out |= {
        "dap_flood_hello_p99_ms": p99(loaded),
        "dap_flood_hello_p99_ratio": p99(loaded) / p99(quiet),
        "dap_flood_rss_added_mb": (max(sampler.rss) - rss_quiet) / 2**20,
        "dap_flood_connections_dropped": counter.value,
    }

    rss_quiet = proc.memory_info().rss
    held: list[socket.socket] = []
    with Sampler(proc, ports) as sampler:
        started = time.monotonic()
        for i in range(HALF_SENT):
            s = socket.create_connection((http.hostname, http.port), timeout=10)
            s.sendall(b"GET /v1/hello HTTP/1.1\r\nHost: x\r\nX-Half: %d" % i)  # the head never ends
            held.append(s)
        loaded = hello_times(http.hostname, http.port, HELLO_SAMPLES)
        open_ = set(held)
        while open_ and time.monotonic() - started < 60:
            poll = select.poll()
            by_fd = {s.fileno(): s for s in open_}
            for fd in by_fd:
                poll.register(fd, select.POLLIN)
            for fd, _ in poll.poll(100):
                open_.discard(by_fd[fd])
        closed_s = time.monotonic() - started
    for s in held:
        s.close()
    return out | {
        "half_sent_hello_p99_ms": p99(loaded),
        "half_sent_hello_p99_ratio": p99(loaded) / p99(quiet),
        "half_sent_rss_added_mb": (max(sampler.rss) - rss_quiet) / 2**20,
        "half_sent_max_connections": max(sampler.conns),
        "half_sent_left_open": len(open_),
        "half_sent_closed_s": closed_s,
    }
