"""Ray 2.60's default: a cluster made by `ray.init()` with RAY_AUTH_MODE unset turns token auth on
and writes its token to ~/.ray/auth_token. The broker, given only `--address`, finds that token the
way Ray does and connects, with nothing set by hand; where it cannot, it says auth is the cause.

Every process here runs with HOME in a temporary folder (Ray reads $HOME/.ray/auth_token), and the
cluster is made in a child process of its own: this suite's other module pins RAY_AUTH_MODE in this
one. The user's own ~/.ray/auth_token is neither read, written nor removed (checked at the end).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from helpers import (
    FIXTURES,
    assert_no_fatal_checks,
    broker_command,
    fatal_checks_in,
    short_temp_dir,
    wait_until,
)

from raysleuth.client import BrokerClient

RAY_AUTH_VARS = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")

DRIVER = """
import json, os, sys
import ray
import ranked_job
ctx = ray.init(address="local", num_cpus=2, include_dashboard=True, dashboard_port=int(sys.argv[2]),
               _temp_dir=sys.argv[1], _node_ip_address="127.0.0.1", log_to_driver=False)
trainer = ray.remote(num_cpus=1)(ranked_job.RankedTrainer).remote(0, 1)
pid = ray.get(trainer.pid.remote())
print(json.dumps({"gcs": ctx.address_info["gcs_address"], "dashboard": ctx.dashboard_url, "pid": pid,
                  "mode": os.environ.get("RAY_AUTH_MODE"), "session": ctx.address_info["session_dir"]}),
      flush=True)
sys.stdin.read()  # until the test closes it
ray.shutdown()
"""


def user_token_state() -> tuple | None:
    """The real user's ~/.ray/auth_token (bytes, mtime), or None where there is none."""
    import pwd

    path = Path(pwd.getpwuid(os.getuid()).pw_dir) / ".ray" / "auth_token"
    try:
        return path.read_bytes(), path.stat().st_mtime_ns
    except OSError:
        return None


def clean_env(home: Path, **extra: str) -> dict:
    """This process's environment with HOME moved and no Ray auth variable: Ray's default applies."""
    env = {k: v for k, v in os.environ.items() if k not in RAY_AUTH_VARS}
    paths = [str(FIXTURES)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env.update(
        HOME=str(home),
        PYTHONPATH=os.pathsep.join(dict.fromkeys(paths)),
        RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0",
        RAY_DEDUP_LOGS="0",
    )
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def default_cluster(tmp_path_factory):
    from helpers import free_port

    before = user_token_state()
    home = tmp_path_factory.mktemp("home")
    temp = short_temp_dir("rs-dauth-")
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, temp, str(free_port())],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(home, RAYSLEUTH="1"),
        start_new_session=True,
    )
    info: dict = {}
    try:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()[-3000:] if proc.poll() is not None else "the driver printed nothing"
        info = json.loads(line)
        yield {"home": home, **info}
    finally:
        proc.stdin.close()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        found = fatal_checks_in(info["session"]) if info else []
        if not found:
            shutil.rmtree(temp, ignore_errors=True)  # else kept: the worker logs name the check
        assert user_token_state() == before, "the user's ~/.ray/auth_token was touched"
        assert_no_fatal_checks(found)


def run_broker(state: Path, address: str, env: dict) -> subprocess.Popen:
    return subprocess.Popen(
        broker_command(state, address),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**env, "RAYSLEUTH": "0"},
        start_new_session=True,
    )


def failed_start(state: Path, address: str, env: dict) -> tuple[str, float]:
    """A broker that must refuse to start: (its stderr, seconds it took)."""
    t0 = time.monotonic()
    out = subprocess.run(
        broker_command(state, address),
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "RAYSLEUTH": "0"},
    )
    took = time.monotonic() - t0
    assert out.returncode == 2 and out.stdout == "", out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    return out.stderr, took


def test_ray_init_turned_token_auth_on_by_default(default_cluster):
    assert default_cluster["mode"] == "token"  # Ray's own default, nothing set by the test
    token = (default_cluster["home"] / ".ray" / "auth_token").read_text().strip()
    assert len(token) == 64
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(f"http://{default_cluster['dashboard']}/api/v0/nodes", timeout=10)
    assert err.value.code == 401


def test_broker_finds_rays_token_by_itself_and_lists_the_agents_worker(default_cluster, tmp_path):
    env = clean_env(default_cluster["home"])
    assert not any(k in env for k in RAY_AUTH_VARS)
    proc = run_broker(tmp_path / "state", default_cluster["gcs"], env)
    try:
        line = proc.stdout.readline()
        assert line, proc.stderr.read()[-3000:] if proc.poll() is not None else "no ready line"
        ready = json.loads(line)
        assert ready["ready"] is True
        client = BrokerClient(ready["http"], Path(ready["token_file"]).read_text().strip())
        pid = default_cluster["pid"]
        w = wait_until(
            lambda: next((w for w in client.workers() if w["pid"] == pid and w["agent"]), None),
            timeout=30,
            message="the driver's actor listed with its agent",
        )
        assert w["rank"] == 0
        # The State API (Ray's dashboard, token-protected) answers the broker: it sent the token.
        status = wait_until(
            lambda: (s := client.get("/v1/status"))["state_api"]["ok"] and s, timeout=15, message="state api"
        )
        assert status["degraded"] == []
        # doctor says where the broker's Ray token came from, and that Ray wrote it readable to all
        token_file = default_cluster["home"] / ".ray" / "auth_token"
        auth = {c["check"]: c for c in client.get("/v1/doctor")["broker"]}["ray auth"]
        assert f"the broker sends the token from {token_file}" in auth["detail"], auth
        if token_file.stat().st_mode & 0o077:
            assert auth["status"] == "warn" and auth["hint"].startswith(f"chmod 600 {token_file}")
        else:
            assert auth["status"] == "ok"
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def test_broker_without_the_token_says_auth_is_the_cause_at_once(default_cluster, tmp_path):
    empty_home = tmp_path / "home"
    empty_home.mkdir()
    err, took = failed_start(tmp_path / "state", default_cluster["gcs"], clean_env(empty_home))
    assert "uses token auth and no token was found here" in err, err
    assert "ray get-auth-token" in err and "RAY_AUTH_TOKEN" in err
    assert took < 30  # asked up front: Ray's own connect retries for about 20 s first


def test_broker_with_a_wrong_token_or_auth_turned_off_says_so(default_cluster, tmp_path):
    home = default_cluster["home"]
    err, _ = failed_start(tmp_path / "a", default_cluster["gcs"], clean_env(home, RAY_AUTH_TOKEN="0" * 64))
    assert "refused the token from RAY_AUTH_TOKEN" in err, err
    err, _ = failed_start(tmp_path / "b", default_cluster["gcs"], clean_env(home, RAY_AUTH_MODE="disabled"))
    assert "uses token auth, but RAY_AUTH_MODE=disabled" in err and "Unset RAY_AUTH_MODE" in err, err
