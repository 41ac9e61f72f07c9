"""Raw-socket clients for the fuzz tests: bytes out, bytes back, a deadline on everything.

The fuzz tests send what no well-behaved client library would (bad request lines, lying
lengths, half-closed sockets), so they speak to the broker through plain sockets. Every read
has a deadline: a broker that never answers fails the test instead of hanging it.
"""

from __future__ import annotations

import json
import os
import random
import socket
import time
from dataclasses import dataclass

from raysleuth.shared.peer import check_broker_peer

REPLY_TIMEOUT_S = 10.0
"""Longest wait for the broker's answer (or its close) to one fuzzed input."""


class Hang(AssertionError):
    """The broker neither answered nor closed the connection in time."""


CI_SEED = 20261203
"""The seed under CI=true: the README test command is repeatable there; elsewhere every run
explores new inputs."""


def fuzz_settings(n: int, seed_value: int):
    """Hypothesis settings for one generator: `n` examples from the printed seed, no deadline
    (the machine is shared), nothing stored between runs."""
    from hypothesis import HealthCheck, seed, settings

    def wrap(fn):
        return seed(seed_value)(
            settings(
                max_examples=n,
                deadline=None,
                database=None,
                print_blob=True,
                suppress_health_check=list(HealthCheck),
            )(fn)
        )

    return wrap


def fuzz_seed() -> int:
    """`RAYSLEUTH_FUZZ_SEED` to replay a run, else CI_SEED under CI, else a new random seed
    (printed by the tests)."""
    text = os.environ.get("RAYSLEUTH_FUZZ_SEED")
    if text:
        return int(text)
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        return CI_SEED
    return random.SystemRandom().randrange(2**32)


def read_until_closed(sock: socket.socket, timeout: float = REPLY_TIMEOUT_S) -> bytes:
    """Everything the peer sends until it closes; Hang after `timeout` s without the close."""
    deadline = time.monotonic() + timeout
    chunks = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise Hang(f"no close within {timeout} s; got {b''.join(chunks)[:300]!r}")
        sock.settimeout(left)
        try:
            data = sock.recv(65536)
        except TimeoutError:
            continue
        except (ConnectionResetError, BrokenPipeError):
            break
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks)


def send_quietly(sock: socket.socket, data: bytes) -> bool:
    """Send `data`; False when the broker closed first (it may refuse a body half-way)."""
    try:
        sock.sendall(data)
        return True
    except (BrokenPipeError, ConnectionResetError):
        return False


def shut_write(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass  # the broker closed already


@dataclass
class HttpReply:
    status: int | None
    """None: the broker closed the connection without an answer."""
    headers: dict
    body: bytes

    def json(self):
        try:
            return json.loads(self.body)
        except ValueError:
            return None


def parse_http(raw: bytes) -> HttpReply:
    if not raw:
        return HttpReply(None, {}, b"")
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    assert parts[0].startswith("HTTP/1."), f"not an HTTP status line: {lines[0]!r}"
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = dechunk(body)
    return HttpReply(int(parts[1]), headers, body)


def dechunk(data: bytes) -> bytes:
    out = []
    while data:
        size_line, _, rest = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out.append(rest[:size])
        data = rest[size + 2 :]
    return b"".join(out)


def http_exchange(
    addr: tuple[str, int], data: bytes, *, shut: bool = False, timeout: float = REPLY_TIMEOUT_S
) -> HttpReply:
    """One request on a new connection (it should say `Connection: close`); the reply."""
    with socket.create_connection(addr, timeout=timeout) as sock:
        check_broker_peer(sock, f"{addr[0]}:{addr[1]}")  # the token goes to a broker of ours only (#37)
        send_quietly(sock, data)
        if shut:
            shut_write(sock)
        return parse_http(read_until_closed(sock, timeout))


def http_request(
    method: str,
    target: str,
    token: str | None,
    body: bytes = b"",
    headers: dict | None = None,
) -> bytes:
    """A well-formed HTTP/1.1 request that closes its connection after the answer."""
    lines = [f"{method} {target} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
    if token is not None:
        lines.append(f"Authorization: Bearer {token}")
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8", "surrogateescape") + body


def dap_frame(message: dict | bytes) -> bytes:
    body = message if isinstance(message, bytes) else json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def parse_dap(raw: bytes) -> list[dict]:
    """The messages in a byte stream the broker sent; fails on anything that is not DAP."""
    out = []
    while raw:
        head, sep, rest = raw.partition(b"\r\n\r\n")
        assert sep, f"a DAP header without its end: {raw[:200]!r}"
        length = None
        for line in head.split(b"\r\n"):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        assert length is not None and len(rest) >= length, f"a cut DAP message: {raw[:200]!r}"
        out.append(json.loads(rest[:length]))
        raw = rest[length:]
    return out


def broker_rss_mb(pid: int) -> float:
    import psutil

    return psutil.Process(pid).memory_info().rss / 2**20


def broker_connections(pid: int) -> int:
    """Client connections the broker holds open on its own ports (HTTP, DAP). Its outbound ones
    (Ray's GCS and dashboard, loopback links to workers' debugpy) come and go with other tests."""
    import psutil

    conns = psutil.Process(pid).net_connections("tcp")
    ports = {c.laddr.port for c in conns if c.status == psutil.CONN_LISTEN}
    return sum(1 for c in conns if c.status != psutil.CONN_LISTEN and c.laddr.port in ports)


TCP_ESTABLISHED = 1
"""`tcpi_state` of a connection both ends still hold (Linux's TCP_ESTABLISHED)."""


def peer_dropped(sock: socket.socket) -> bool:
    """Whether the far end ended this TCP connection (a FIN or a reset came), by the kernel's
    state of it: no read, no write, so a client that never reads can ask without provoking
    anything (its unread input would hide an EOF from a peek)."""
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0] != TCP_ESTABLISHED
