"""`raysleuth doctor` on the real cluster: each node's checks come from its relay (a Ray actor
there), the broker adds its own; the CLI prints them and exits 1 only on a failure."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time

import ray

from raysleuth.probes import pyspy
from raysleuth.shared import names


def test_doctor_checks_every_node_through_its_relay_and_the_broker(broker, client):
    report = client.get("/v1/doctor")
    assert [n["node_ip"] for n in report["nodes"]] == ["127.0.0.1"]
    assert report["nodes"][0]["node_id"] == ray.get_runtime_context().get_node_id()
    checks = {c["check"]: c for c in report["nodes"][0]["checks"]}
    assert list(checks) == [
        "python", "ray", "debugpy", "agent", "gpu", "clock", "logs", "py-spy", "flight recorder",
        "pause timeouts",
    ]  # fmt: skip
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
    # The relay reads processes as this test does (same machine, same user): py-spy agrees here.
    can_read = pyspy.dump(os.getpid())["error"] is None
    assert checks["py-spy"]["status"] == ("ok" if can_read else "warn"), checks["py-spy"]
    fr = os.environ.get("TORCH_FR_BUFFER_SIZE")  # the raylet, started from here, has this one
    has_torch = importlib.util.find_spec("torch") is not None
    expected_fr = "info" if not has_torch or fr is None else ("ok" if fr != "0" else "warn")
    assert checks["flight recorder"]["status"] == expected_fr, checks["flight recorder"]
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


SLEEPER = "import time\ndef nap():\n    time.sleep(1000)  # line 3\nnap()\n"


def test_the_node_relay_dumps_a_process_of_its_node_with_py_spy(broker, client, tmp_path):
    client.get("/v1/doctor")  # the relay of this node exists from here on
    node_id = ray.get_runtime_context().get_node_id()
    relay = ray.get_actor(f"raysleuth-relay-{node_id[:16]}", namespace=names.NAMESPACE)
    script = tmp_path / "napper.py"
    script.write_text(SLEEPER)
    proc = subprocess.Popen([sys.executable, str(script)])
    try:
        # Whether this machine lets py-spy read a process at all: a permission refusal, not the
        # child still starting up (py-spy finds no Python in it yet) or a slow answer under load.
        local = pyspy.dump(proc.pid, timeout=10.0)
        if local["error"] is not None and "permission denied" in local["error"]:
            gone = ray.get(relay.pyspy_dump.remote(proc.pid))
            assert gone["threads"] == [] and gone["error"], gone  # refused here too: says why
            return
        end = time.monotonic() + 30
        while True:  # until the child is inside its nap (it needs a moment to get there)
            res = ray.get(relay.pyspy_dump.remote(proc.pid, False, 10.0))
            if res["error"] is None:
                [main] = [t for t in res["threads"] if t["main"]]
                if main["frames"] and main["frames"][0]["line"] == 3:
                    break
            else:  # the child still starting (no Python in it yet to py-spy), never a refusal
                assert "permission denied" not in res["error"], res
            assert time.monotonic() < end, res
        assert main["frames"][0] == {
            "path": str(script), "line": 3, "function": "nap", "code": "time.sleep(1000)  # line 3"
        }  # fmt: skip
    finally:
        proc.kill()
        proc.wait()
    gone = ray.get(relay.pyspy_dump.remote(proc.pid))
    assert gone["threads"] == [] and f"process {proc.pid} is gone" in gone["error"]
