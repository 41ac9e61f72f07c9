"""A Ray cluster with Ray's token auth on: the broker still connects, reads the State API (sending
Ray's token) and keeps the contract's process behaviour (ready line, files, clean SIGTERM exit)."""

from __future__ import annotations

import json
import os
import secrets
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import broker_command, broker_env, local_cluster, pin_ray_env, wait_until

RAY_TOKEN = secrets.token_hex(16)
pin_ray_env(auth_mode="token")
os.environ["RAY_AUTH_TOKEN"] = RAY_TOKEN  # never ~/.ray/auth_token: tests leave no state behind

import ranked_job  # noqa: E402
import ray  # noqa: E402

from raysleuth.client import BrokerClient  # noqa: E402


@pytest.fixture(scope="module")
def token_cluster():
    with local_cluster("rs-auth-", num_cpus=4) as ctx:
        yield ctx


def test_dashboard_really_requires_ray_token(token_cluster):
    import urllib.error
    import urllib.request

    url = "http://" + token_cluster.dashboard_url + "/api/v0/nodes"
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(url, timeout=10)
    assert err.value.code == 401


def test_broker_on_token_auth_cluster_lists_agent_and_agentless_workers(token_cluster, tmp_path):
    state = tmp_path / "state"
    proc = subprocess.Popen(
        broker_command(state, token_cluster.address_info["gcs_address"]),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=broker_env(),
        start_new_session=True,
    )
    try:
        ready = json.loads(proc.stdout.readline())
        assert ready["ready"] is True and ready["http"].startswith("http://127.0.0.1:")
        host, port = ready["dap"].rsplit(":", 1)
        assert host == "127.0.0.1" and int(port) > 0
        token_file = Path(ready["token_file"])
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        on_disk = json.loads((state / "broker.json").read_text())
        assert {k: on_disk[k] for k in ("ready", "http", "dap", "token_file")} == {
            k: ready[k] for k in ("ready", "http", "dap", "token_file")
        }

        client = BrokerClient(ready["http"], token_file.read_text().strip())
        with_agent = ray.remote(num_cpus=1)(ranked_job.RankedTrainer).remote(0, 1)
        without = (
            ray.remote(num_cpus=1)(ranked_job.EnvRanked)
            .options(runtime_env={"env_vars": {"RAYSLEUTH": "0"}})
            .remote()
        )
        pids = ray.get([with_agent.pid.remote(), without.pid.remote()])

        def both():
            ws = {w["pid"]: w for w in client.workers() if w["pid"] in pids and w["actor_class"]}
            return ws if len(ws) == 2 and ws[pids[0]]["rank"] == 0 else None

        ws = wait_until(both, timeout=15, message="both workers listed, the agent's with its rank")
        assert ws[pids[0]]["agent"] is True
        assert ws[pids[1]]["agent"] is False  # seen only through Ray's token-protected State API
        status = client.get("/v1/status")
        assert status["state_api"] == {"ok": True, "error": None} and status["degraded"] == []
        nodes = client.nodes()
        assert len(nodes) == 1 and nodes[0]["alive"]

        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
        assert time.monotonic() - t0 < 10
        assert not (state / "broker.json").exists()
        assert proc.stdout.read() == ""  # exactly one line on stdout
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


def test_sigint_right_after_ready_exits_zero_without_a_traceback(token_cluster, tmp_path):
    """Stopped in its first second, while it still starts node relays: every background task is
    owned, cancelled and awaited, so nothing is left to print "Task exception was never retrieved"."""
    proc = subprocess.Popen(
        broker_command(tmp_path, token_cluster.address_info["gcs_address"]),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=broker_env(),
        start_new_session=True,
    )
    try:
        assert json.loads(proc.stdout.readline())["ready"] is True
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=10)
        assert proc.returncode == 0
        assert "Traceback" not in err and "never retrieved" not in err, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


def test_broker_without_a_cluster_fails_with_a_hint(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "raysleuth",
            "broker",
            "--state-dir",
            str(tmp_path),
            "--address",
            "127.0.0.1:1",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "RAYSLEUTH": "0"},
    )
    assert out.returncode == 2 and out.stdout == ""
    assert "Cannot connect to Ray" in out.stderr and "ray start --head" in out.stderr
