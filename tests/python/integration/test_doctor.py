"""`raysleuth doctor` on the real cluster: each node's checks come from its relay (a Ray actor
there), the broker adds its own; the CLI prints them and exits 1 only on a failure."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import ray


def test_doctor_checks_every_node_through_its_relay_and_the_broker(broker, client):
    report = client.get("/v1/doctor")
    assert [n["node_ip"] for n in report["nodes"]] == ["127.0.0.1"]
    assert report["nodes"][0]["node_id"] == ray.get_runtime_context().get_node_id()
    checks = {c["check"]: c for c in report["nodes"][0]["checks"]}
    assert list(checks) == ["python", "ray", "debugpy", "agent", "gpu", "clock", "logs"]
    assert checks["ray"] == {"check": "ray", "status": "ok", "detail": f"Ray {ray.__version__}", "hint": None}
    # The tests' cluster starts with RAYSLEUTH=1 (helpers.pin_ray_env): the raylet hands it to workers.
    assert checks["agent"]["status"] == "ok", checks["agent"]
    expected = "ok" if sys.version_info >= (3, 12) else "warn"
    assert checks["python"]["status"] == expected
    if expected == "warn":
        assert "3.12" in checks["python"]["hint"]
    assert checks["debugpy"]["status"] == "ok" and checks["clock"]["status"] == "ok"
    assert checks["gpu"]["status"] in ("ok", "info")  # no GPU on the test machines: info, not a failure
    assert checks["logs"]["status"] in ("ok", "warn") and "free" in checks["logs"]["detail"]
    own = {c["check"]: c["status"] for c in report["broker"]}
    assert own["nodes"] == "ok" and own["listen"] == "ok" and own["workers"] in ("ok", "warn")
    assert report["ok"] is True

    env = dict(os.environ, RAYSLEUTH_TOKEN=broker.token)
    cli = [sys.executable, "-m", "raysleuth", "doctor", "--broker", broker.http]
    text = subprocess.run(cli, env=env, capture_output=True, text=True, check=False)
    assert text.returncode == 0, text.stdout + text.stderr
    assert "node 127.0.0.1" in text.stdout and "] agent: workers start the agent" in text.stdout
    as_json = subprocess.run([*cli, "--json"], env=env, capture_output=True, text=True, check=True)
    assert [c["check"] for c in json.loads(as_json.stdout)["nodes"][0]["checks"]] == list(checks)
