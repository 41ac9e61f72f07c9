"""Token theft by relaying the proof (#37, finding 1), tried as `nobody` against the real broker:
a relay on a free loopback port forwards each connection to the live broker (the hello proof
included) and records what the client sent. Our clients (the CLI, BrokerClient, the language
server's connector, `raysleuth attach`) see that the port belongs to another uid and send it
nothing; a DAP client of another editor that sends a ticket through it gives away one spent
ticket; against the real broker the same commands work.

Runs as root (to become `nobody` with runuser); skipped with the reason where it cannot."""

from __future__ import annotations

import base64
import json
import os
import pwd
import shutil
import subprocess
import sys
import threading

import aiohttp
import pytest
import ranked_job
import ray
from helpers import FIXTURES, dap_address, wait_until

from raysleuth.cli.attach import run_attach
from raysleuth.client import BrokerClient
from raysleuth.dap.client import DapClient, open_session
from raysleuth.lsp.live import BrokerOptions, CheckedConnector
from raysleuth.shared.errors import SleuthError

SYSTEM_PYTHON = "/usr/bin/python3"
RELAY = (FIXTURES / "token_relay.py").read_text()
RANK = 310


def nobody_uid() -> int | None:
    try:
        return pwd.getpwnam("nobody").pw_uid
    except KeyError:
        return None


pytestmark = pytest.mark.skipif(
    os.geteuid() != 0
    or not shutil.which("runuser")
    or not os.path.exists(SYSTEM_PYTHON)
    or nobody_uid() is None,
    reason="needs root, runuser and /usr/bin/python3 to run the relay as `nobody`",
)


class Relay:
    """token_relay.py as `nobody`, forwarding to host:port; what the clients sent it, by connection."""

    def __init__(self, host: str, port: int) -> None:
        self.proc = subprocess.Popen(
            ["runuser", "-u", "nobody", "--", SYSTEM_PYTHON, "-c", RELAY, host, str(port)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd="/",
        )  # fmt: skip
        self.port = json.loads(self.proc.stdout.readline())["port"]
        self.lines: list[dict] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(json.loads(line))

    def count(self, event: str) -> int:
        return sum(1 for x in list(self.lines) if x.get("event") == event)

    def sent(self) -> bytes:
        """Every byte the clients sent, once every connection it accepted has ended."""
        wait_until(lambda: self.count("closed") >= self.count("accepted"), 20, message="relay drained")
        return b"".join(base64.b64decode(x["data"]) for x in list(self.lines) if "data" in x)

    def close(self) -> None:
        self.proc.stdin.close()  # the relay exits at the end of its stdin
        self.proc.wait(10)
        self.reader.join(10)


@pytest.fixture
def http_relay(broker):
    host, port = broker.http.removeprefix("http://").rsplit(":", 1)
    relay = Relay(host, int(port))
    yield relay
    relay.close()


@pytest.fixture
def dap_relay(broker):
    relay = Relay(*dap_address(broker))
    yield relay
    relay.close()


REFUSED = f"belongs to uid {nobody_uid()}, not to you"


def cli(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "raysleuth", *args], capture_output=True, text=True, timeout=120, env=env
    )


def cli_env(broker, url: str) -> dict:
    return {**os.environ, "RAYSLEUTH_BROKER": url, "RAYSLEUTH_TOKEN": broker.token, "RAYSLEUTH": "0"}


def assert_no_secret(sent: bytes, broker, *also: str) -> None:
    for secret in (
        b"Authorization",
        broker.token.encode(),
        b'"token"',
        b'"ticket"',
        *(s.encode() for s in also),
    ):
        assert secret not in sent, (secret, sent[:400])


def test_the_cli_sends_nothing_to_a_relay_another_user_runs(broker, http_relay):
    env = cli_env(broker, f"http://127.0.0.1:{http_relay.port}")
    for args in (["list"], ["list", "--json"], ["ticket", "--rank", "0"]):
        out = cli(*args, env=env)
        assert out.returncode == 2 and out.stdout == "", (args, out)
        first, *rest = out.stderr.splitlines()
        assert first.startswith("error: ") and REFUSED in first and f"127.0.0.1:{http_relay.port}" in first
        assert [r for r in rest if not r.startswith("hint: ")] == [] and "Traceback" not in out.stderr
    assert http_relay.count("accepted") == 3  # each connected, then sent no byte
    assert http_relay.sent() == b""


async def test_broker_client_and_the_language_servers_connector_send_nothing_to_the_relay(
    broker, http_relay, monkeypatch
):
    monkeypatch.setenv("RAYSLEUTH_TOKEN", broker.token)
    url = f"http://127.0.0.1:{http_relay.port}"
    client = BrokerClient(url, broker.token, timeout=10)
    for call in (lambda: client.verify("RAYSLEUTH_BROKER"), client.workers, lambda: next(client.events())):
        with pytest.raises(SleuthError, match=REFUSED):
            call()
    with pytest.raises(SleuthError, match=REFUSED):  # the language server's discovery
        BrokerOptions(broker=url).discover()
    async with aiohttp.ClientSession(connector=CheckedConnector()) as http:
        with pytest.raises(SleuthError, match=REFUSED):
            await http.get(f"{url}/v1/stream", headers={"Authorization": f"Bearer {broker.token}"})
    assert http_relay.count("accepted") == 5
    assert http_relay.sent() == b""


async def test_raysleuth_attach_sends_no_ticket_or_token_to_a_relay_on_the_dap_port(
    broker, client, dap_relay
):
    with pytest.raises(SleuthError, match=REFUSED):
        await open_session("127.0.0.1", dap_relay.port, {"token": broker.token, "rank": RANK})
    ticket = client.post("/v1/tickets", {"rank": RANK})["ticket"]
    with pytest.raises(SleuthError, match=REFUSED):
        await run_attach(f"127.0.0.1:{dap_relay.port}", ticket, {"rank": RANK})
    assert dap_relay.sent() == b""
    assert_no_secret(dap_relay.sent(), broker, ticket)


async def test_a_ticket_another_editor_sent_through_the_relay_is_spent(broker, client, dap_relay):
    """A DAP client that cannot check the port (nvim-dap) gives the relay a ticket, not the token;
    the ticket was spent by that attach and is bound to one target: replayed, it is refused."""
    ticket = client.post("/v1/tickets", {"rank": 4242})["ticket"]
    c = await DapClient.connect("127.0.0.1", dap_relay.port)  # no peer check: another editor
    try:
        await c.request("initialize", {"adapterID": "raysleuth"})
        first = await c.request("attach", {"ticket": ticket, "rank": 4242}, check=False, timeout=30)
        assert not first["success"] and "No live worker has rank 4242" in first["message"], first
    finally:
        await c.close()
    sent = dap_relay.sent()
    assert ticket.encode() in sent and broker.token.encode() not in sent
    host, port = dap_address(broker)
    c = await DapClient.connect(host, port)  # the thief replays what it read
    try:
        await c.request("initialize", {"adapterID": "raysleuth"})
        replay = await c.request("attach", {"ticket": ticket, "rank": 4242}, check=False, timeout=30)
        assert not replay["success"] and "the attach ticket is unknown, used or expired" in replay["message"]
    finally:
        await c.close()


@pytest.fixture(scope="module")
def ranked(ray_cluster, client):
    actor = ray.remote(num_cpus=1)(ranked_job.RankedTrainer).remote(RANK, 1)
    pid = ray.get(actor.pid.remote())
    wait_until(
        lambda: any(w["pid"] == pid and w["rank"] == RANK for w in client.workers()),
        timeout=20,
        message=f"rank {RANK} listed",
    )
    yield actor
    ray.kill(actor)


def test_against_the_real_broker_the_same_commands_work(broker, client, ranked):
    env = cli_env(broker, broker.http)
    listed = cli("list", "--json", env=env)
    assert listed.returncode == 0 and any(w["rank"] == RANK for w in json.loads(listed.stdout)), listed
    BrokerClient(broker.http, broker.token).verify("test")
    ticket = cli("ticket", "--rank", str(RANK), "--json", env=env)
    assert ticket.returncode == 0, ticket.stderr
    answer = json.loads(ticket.stdout)
    assert (
        len(answer["ticket"]) == 64 and answer["single_use"] is True and answer["dap"] == broker.ready["dap"]
    )
    # `raysleuth attach` with a ticket: attached, then end of input detaches.
    attach = subprocess.run(
        [sys.executable, "-m", "raysleuth", "attach", "--rank", str(RANK)],
        input="", capture_output=True, text=True, timeout=180, env=env,
    )  # fmt: skip
    assert attach.returncode == 0, attach.stderr
    assert f"attached to rank {RANK}" in attach.stdout and "detached; the worker runs on" in attach.stdout


async def test_a_ticket_attaches_a_dap_session_to_a_live_worker_once(broker, client, ranked):
    host, port = dap_address(broker)
    ticket = client.post("/v1/tickets", {"rank": RANK})["ticket"]
    s = await open_session(host, port, {"ticket": ticket, "rank": RANK})
    try:
        assert (await s.request("threads", {}))["body"]["threads"]
    finally:
        await s.request("disconnect", {}, check=False)
        await s.close()
    c = await DapClient.connect(host, port)
    try:
        await c.request("initialize", {"adapterID": "raysleuth"})
        again = await c.request("attach", {"ticket": ticket, "rank": RANK}, check=False, timeout=30)
        assert not again["success"] and "unknown, used or expired" in again["message"]
    finally:
        await c.close()


def test_the_relay_fixture_is_a_real_relay(broker, http_relay):
    """The control: a client without the check (plain urllib) reaches the broker through the
    relay, and the relay reads its Authorization header (what the CLI sent before #37)."""
    import urllib.request

    req = urllib.request.Request(
        f"http://127.0.0.1:{http_relay.port}/v1/status", headers={"Authorization": f"Bearer {broker.token}"}
    )
    with urllib.request.urlopen(req, timeout=20) as resp:
        assert json.load(resp)["dap"] == broker.ready["dap"]
    assert b"Authorization: Bearer " + broker.token.encode() in http_relay.sent()
