"""Our clients send nothing to a peer they cannot prove is a broker of ours (#37): the CLI's urllib
client, the language server's aiohttp connector and the DAP attach check each connection before
its first byte. Here the peer is a listener on this machine's non-loopback address (refused: not
provable); the other-user case runs as `nobody` in integration/test_relay_nobody.py. A listener of
ours on loopback is accepted."""

from __future__ import annotations

import asyncio
import socket
import threading

import aiohttp
import psutil
import pytest
from helpers import wait_until

from raysleuth.client import BrokerClient
from raysleuth.dap.client import open_session
from raysleuth.shared.errors import SleuthError

TOKEN = "s" * 40


def outside_address() -> str | None:
    for addrs in psutil.net_if_addrs().values():
        for a in addrs:
            if a.family == socket.AF_INET and not a.address.startswith("127."):
                return a.address
    return None


class Listener:
    """Accepts connections on `host` and keeps every byte they send."""

    def __init__(self, host: str, reply: bytes = b"") -> None:
        self.sock = socket.create_server((host, 0))
        self.port = self.sock.getsockname()[1]
        self.reply = reply
        self.got: list[bytes] = []
        self.accepted = 0
        self.finished = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        conn.settimeout(3)
        with conn:
            try:
                while data := conn.recv(65536):
                    self.got.append(data)
                    if self.reply and b"\r\n\r\n" in b"".join(self.got):
                        conn.sendall(self.reply)
                        return
            except OSError:
                pass
            finally:
                self.finished += 1

    def got_after(self, connections: int) -> bytes:
        """Every byte sent, once `connections` connections have ended."""
        wait_until(lambda: self.finished >= connections, 10, message=f"{connections} connections ended")
        return b"".join(self.got)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def outside():
    host = outside_address()
    if host is None:
        pytest.skip("no non-loopback IPv4 address on this machine")
    listener = Listener(host)
    yield listener
    listener.close()


def test_the_cli_client_sends_no_byte_to_a_peer_off_loopback(outside):
    url = f"http://{outside.sock.getsockname()[0]}:{outside.port}"
    client = BrokerClient(url, TOKEN, timeout=3)
    for call in (lambda: client.verify("--broker"), client.workers, lambda: next(client.events())):
        with pytest.raises(SleuthError, match="not on this machine's loopback.*token was not sent"):
            call()
    assert outside.got_after(3) == b"" and outside.accepted == 3


async def test_the_language_servers_connector_sends_no_byte_to_a_peer_off_loopback(outside):
    from raysleuth.lsp.live import CheckedConnector

    url = f"http://{outside.sock.getsockname()[0]}:{outside.port}/v1/stream"
    async with aiohttp.ClientSession(connector=CheckedConnector()) as http:
        with pytest.raises(SleuthError, match="not on this machine's loopback"):
            await http.get(url, headers={"Authorization": f"Bearer {TOKEN}"})
    assert await asyncio.to_thread(outside.got_after, 1) == b""


async def test_a_dap_attach_with_a_secret_sends_no_byte_to_a_peer_off_loopback(outside):
    host = outside.sock.getsockname()[0]
    for secret in ({"ticket": "a" * 64}, {"token": TOKEN}):
        with pytest.raises(SleuthError, match="DAP port .* not on this machine's loopback"):
            await open_session(host, outside.port, {**secret, "rank": 0})
    assert await asyncio.to_thread(outside.got_after, 2) == b""


async def test_a_listener_of_ours_on_loopback_gets_the_request():
    from raysleuth.lsp.live import CheckedConnector

    body = b'{"ok": 1}'
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
    reply = head + b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    ours = Listener("127.0.0.1", reply)
    try:
        async with aiohttp.ClientSession(connector=CheckedConnector()) as http:
            headers = {"Authorization": f"Bearer {TOKEN}"}
            async with http.get(f"http://127.0.0.1:{ours.port}/v1/status", headers=headers) as res:
                assert await res.json() == {"ok": 1}
        assert BrokerClient(f"http://127.0.0.1:{ours.port}", TOKEN).get("/v1/status") == {"ok": 1}
        assert b"Authorization: Bearer " + TOKEN.encode() in b"".join(ours.got)
    finally:
        ours.close()


async def test_the_connector_checks_each_connection_once(monkeypatch):
    from aiohttp import web
    from aiohttp.test_utils import TestServer

    from raysleuth.lsp import live

    checks = []
    real = live.check_broker_peer
    monkeypatch.setattr(
        live, "check_broker_peer", lambda sock, where: (checks.append(where), real(sock, where))
    )
    app = web.Application()
    app.router.add_get("/v1/status", lambda request: web.json_response({"ok": 1}))
    async with TestServer(app, host="127.0.0.1") as server:
        async with aiohttp.ClientSession(connector=live.CheckedConnector()) as http:
            for _ in range(3):  # keep-alive: one connection, checked once
                async with http.get(server.make_url("/v1/status")) as res:
                    assert await res.json() == {"ok": 1}
            assert len(checks) == 1
            async with http.get(server.make_url("/v1/status"), headers={"Connection": "close"}) as res:
                await res.read()
            async with http.get(server.make_url("/v1/status")) as res:  # a new connection: checked
                await res.read()
            assert len(checks) == 2
