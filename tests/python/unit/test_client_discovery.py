"""How the CLI finds the broker and its token, and never hands the token to a squatter (#23):
a real broker HTTP app (its router and auth) on a loopback port, and stand-ins for a process that
took a dead broker's port."""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import threading

import pytest
from aiohttp import web
from broker_fakes import services

from raysleuth.broker.http_api import make_app
from raysleuth.client import BrokerClient
from raysleuth.shared.errors import BrokerUnreachable, SleuthError

TOKEN = "t" * 40


class Table:
    def workers_json(self):
        return [{"id": "w1"}]


@contextlib.contextmanager
def broker_app(token: str = TOKEN, hub=None, table=None, **given):
    """The broker's real HTTP app on a loopback port, in a thread of its own; `given`: the
    services the test brings (the others are None)."""
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(
        make_app(services(token, table or Table(), **given, **({"hub": hub} if hub else {})))
    )
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = site._server.sockets[0].getsockname()[1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield (f"http://127.0.0.1:{port}", loop) if hub else f"http://127.0.0.1:{port}"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.run_until_complete(runner.cleanup())
        loop.close()


@contextlib.contextmanager
def squatter():
    """A process that answers 200 {} to anything and keeps every header it was sent."""
    seen: list[dict] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            seen.append(dict(self.headers))
            body = json.dumps({"proof": "0" * 64}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def state(tmp_path, url: str, pid: int | None = None, **extra) -> os.PathLike:
    sd = tmp_path / "state"
    sd.mkdir(mode=0o700, exist_ok=True)
    tok = sd / "token"
    tok.write_text(TOKEN + "\n")
    os.chmod(tok, 0o600)
    info = {
        "ready": True,
        "http": url,
        "dap": "127.0.0.1:10",
        "token_file": str(tok),
        "pid": pid or os.getpid(),
    }
    (sd / "broker.json").write_text(json.dumps({**info, **extra}))
    os.chmod(sd / "broker.json", 0o600)
    return sd


@pytest.fixture(autouse=True)
def no_env(monkeypatch):
    monkeypatch.delenv("RAYSLEUTH_BROKER", raising=False)
    monkeypatch.delenv("RAYSLEUTH_TOKEN", raising=False)


def test_discovers_the_broker_of_the_state_dir_after_it_proved_it_holds_the_token(tmp_path):
    with broker_app() as url:
        c = BrokerClient.discover(state_dir=state(tmp_path, url))
        assert (c.url, c.token) == (url, TOKEN) and c.workers() == [{"id": "w1"}]


def test_a_squatter_on_a_dead_brokers_port_never_gets_the_token(tmp_path):
    with squatter() as (url, seen):
        with pytest.raises(SleuthError, match="could not prove it holds your token") as err:
            BrokerClient.discover(state_dir=state(tmp_path, url))
    assert "raysleuth broker" in err.value.hint
    assert seen and not any(TOKEN in json.dumps(h) for h in seen)
    assert not any(k.lower() == "authorization" for h in seen for k in h)


def test_a_stale_broker_file_is_reported_without_contacting_its_address(tmp_path):
    proc = subprocess.Popen(["true"])
    proc.wait()  # a pid that has ended
    with squatter() as (url, seen):
        with pytest.raises(BrokerUnreachable, match=f"is gone \\(pid {proc.pid}\\)") as err:
            BrokerClient.discover(state_dir=state(tmp_path, url, pid=proc.pid))
    assert "raysleuth broker" in err.value.hint and seen == []


def test_a_planted_broker_file_cannot_choose_the_token_file(tmp_path):
    key = tmp_path / "id_rsa"
    key.write_text("PRIVATE KEY")
    os.chmod(key, 0o600)
    with squatter() as (url, seen):
        sd = state(tmp_path, url, token_file=str(key))
        with pytest.raises(SleuthError, match="could not prove"):
            BrokerClient.discover(state_dir=sd)
    assert "PRIVATE KEY" not in json.dumps(seen)
    os.chmod(sd / "broker.json", 0o666)  # others could have written it
    with pytest.raises(SleuthError, match="may have been planted"):
        BrokerClient.discover(state_dir=sd)
    os.chmod(sd, 0o777)
    with pytest.raises(SleuthError, match="Others can write the state dir"):
        BrokerClient.discover(state_dir=sd)


@pytest.mark.parametrize("how", ["link", "0644"])
def test_a_token_file_that_is_a_link_or_readable_by_others_is_refused(tmp_path, how):
    with broker_app() as url:
        sd = state(tmp_path, url)
        tok = sd / "token"
        if how == "link":
            real = tmp_path / "elsewhere"
            real.write_text(TOKEN)
            os.chmod(real, 0o600)
            tok.unlink()
            tok.symlink_to(real)
        else:
            os.chmod(tok, 0o644)
        with pytest.raises(
            SleuthError, match="symbolic link" if how == "link" else "not a file only you can read"
        ):
            BrokerClient.discover(state_dir=sd)


def test_flag_and_env_win_over_broker_file(tmp_path, monkeypatch):
    with broker_app() as url, broker_app() as other:
        sd = state(tmp_path, other)
        monkeypatch.setenv("RAYSLEUTH_TOKEN", TOKEN)
        monkeypatch.setenv("RAYSLEUTH_BROKER", url)
        assert BrokerClient.discover(state_dir=sd).url == url
        c = BrokerClient.discover(url, state_dir=sd)
        assert (c.url, c.token) == (url, TOKEN)
    with pytest.raises(SleuthError, match="'notaurl' \\(from --broker\\) is not a broker URL"):
        BrokerClient.discover("notaurl", state_dir=sd)


def test_missing_broker_file_says_how_to_start_one(tmp_path):
    with pytest.raises(BrokerUnreachable) as err:
        BrokerClient.discover(state_dir=tmp_path)
    assert "raysleuth broker" in err.value.hint


def test_connection_refused_is_a_clear_error():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    with pytest.raises(BrokerUnreachable) as err:
        BrokerClient(f"http://127.0.0.1:{port}", "t", timeout=2).workers()
    assert "Cannot reach the broker" in err.value.message and "raysleuth broker" in err.value.hint


SQUATTER = r"""
import http.server, json, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        print(json.dumps(dict(self.headers)), flush=True)
        body = json.dumps({"proof": "0" * 64}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"""


@pytest.mark.skipif(
    os.geteuid() != 0 or not os.path.exists("/usr/bin/python3") or not shutil.which("runuser"),
    reason="needs root, runuser and /usr/bin/python3 to run the squatter as `nobody`",
)
def test_a_squatter_run_by_another_user_on_a_stale_brokers_port_gets_no_token(tmp_path):
    """The stale broker.json names a port another local user now holds, and (pid reuse) a pid
    that is alive: `raysleuth list` refuses on seeing the port's owner, before a byte (#37)."""
    squat = subprocess.Popen(
        ["runuser", "-u", "nobody", "--", "/usr/bin/python3", "-c", SQUATTER],
        stdout=subprocess.PIPE, text=True, cwd="/", start_new_session=True,
    )  # fmt: skip
    try:
        port = int(squat.stdout.readline())
        sd = state(tmp_path, f"http://127.0.0.1:{port}", pid=squat.pid)
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAYSLEUTH")}
        out = subprocess.run(
            [sys.executable, "-m", "raysleuth", "list", "--state-dir", str(sd)],
            capture_output=True, text=True, timeout=60, env=env, check=False,
        )  # fmt: skip
        nobody = pwd.getpwnam("nobody").pw_uid
        assert out.returncode == 2 and f"belongs to uid {nobody}, not to you" in out.stderr, out.stderr
    finally:
        os.killpg(squat.pid, signal.SIGKILL)  # runuser and the squatter it started
        seen = squat.communicate(timeout=10)[0]
    assert seen == "", seen  # no request at all: not even the hello


def test_the_client_reads_the_event_stream_with_only_the_events_asked_for():
    from raysleuth.broker.events import EventHub

    hub = EventHub()
    with broker_app(hub=hub) as (url, loop):
        client = BrokerClient(url, TOKEN)
        events = client.events(("workers", "hang"), timeout=10)
        assert next(events) == ("workers", [{"id": "w1"}])  # the table, first, on every connect
        loop.call_soon_threadsafe(hub.publish, "log", {"message": "not asked for"})
        loop.call_soon_threadsafe(hub.publish, "hang", {"ranks": [3]})
        assert next(events) == ("hang", {"ranks": [3]})
        events.close()
