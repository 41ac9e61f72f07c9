"""The uid behind a loopback peer, read from the kernel's tables: real sockets of ours (IPv4, IPv6,
a dual-stack listener whose sockets sit in tcp6 as ::ffff:127.0.0.1) and a listener run as
`nobody`, whose uid is what a client refuses."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess

import pytest

from raysleuth.shared.errors import SleuthError
from raysleuth.shared.peer import _row_fields, check_broker_peer, is_loopback, peer_of


def pair(family: int, host: str, dual: bool = False):
    srv = socket.socket(family)
    if dual:
        srv.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    srv.bind((host, 0))
    srv.listen()
    client = socket.create_connection(("127.0.0.1" if dual else host, srv.getsockname()[1]))
    accepted, _ = srv.accept()
    return srv, client, accepted


@pytest.mark.parametrize(
    "family,host,dual",
    [(socket.AF_INET, "127.0.0.1", False), (socket.AF_INET6, "::1", False), (socket.AF_INET6, "::", True)],
)
def test_our_peer_is_us_both_ways(family, host, dual):
    socks = pair(family, host, dual)
    try:
        _, client, accepted = socks
        mine = peer_of(client, with_pid=True)
        assert mine is not None and mine.uid == os.getuid() and mine.pid == os.getpid()
        assert peer_of(accepted).uid == os.getuid()
        check_broker_peer(client, "test")
    finally:
        for s in socks:
            s.close()


def test_table_spelling_of_an_address():
    v4 = (b"\0" * 10 + b"\xff\xff" + bytes([127, 0, 0, 1]), 8080)
    assert _row_fields(v4) == ("0100007F:1F90", "0000000000000000FFFF00000100007F:1F90")
    v6 = (b"\0" * 15 + b"\x01", 80)
    assert _row_fields(v6) == ("", "00000000000000000000000001000000:0050")


def test_loopback_names():
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("[::1]")
    assert is_loopback("::ffff:127.0.0.1") and is_loopback("localhost")
    assert not is_loopback("192.0.2.2") and not is_loopback("example.com")


@pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("runuser") or not os.path.exists("/usr/bin/python3"),
    reason="needs root, runuser and /usr/bin/python3 to listen as `nobody`",
)
def test_a_listener_of_another_user_is_refused():
    listener = subprocess.Popen(
        [
            "runuser",
            "-u",
            "nobody",
            "--",
            "/usr/bin/python3",
            "-c",
            "import socket,sys\ns=socket.socket(); s.bind(('127.0.0.1',0)); s.listen()\n"
            "print(s.getsockname()[1], flush=True); c,_=s.accept(); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        port = int(listener.stdout.readline())
        with socket.create_connection(("127.0.0.1", port)) as sock:
            assert peer_of(sock).uid == 65534
            with pytest.raises(SleuthError, match="belongs to uid 65534"):
                check_broker_peer(sock, f"127.0.0.1:{port}")
    finally:
        listener.kill()
        listener.wait(5)
