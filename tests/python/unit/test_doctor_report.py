"""`raysleuth doctor`'s report text and exit status, and the checks of this very machine."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import OTHERS_MAY_NOT_ENTER, others_may_enter

from raysleuth.cli.doctor import format_report, run_doctor
from raysleuth.probes.checks import _flight_recorder, node_checks
from raysleuth.probes.pyspy import find_binary

BACKEND = Path(__file__).resolve().parents[3] / "python_backend"


class Client:
    """The broker's answer, at the CLI's seam to it."""

    def __init__(self, report):
        self.report = report

    def get(self, path):
        assert path == "/v1/doctor"
        return self.report


def check(name, status, detail="d", hint=None):
    return {"check": name, "status": status, "detail": detail, "hint": hint}


REPORT = {
    "ok": False,
    "broker": [check("nodes", "ok", "1 alive node(s)")],
    "nodes": [
        {
            "node_id": "abcdef123456",
            "node_ip": "10.0.0.2",
            "checks": [
                check("debugpy", "fail", "ModuleNotFoundError", "pip install debugpy"),
                check("gpu", "info"),
            ],
        }
    ],
}


def test_a_failed_check_is_shown_with_its_hint_and_exits_1(capsys):
    assert run_doctor(Client(REPORT), json_out=False) == 1
    out = capsys.readouterr().out
    assert "node 10.0.0.2 (abcdef)" in out
    assert "[FAIL] debugpy: ModuleNotFoundError" in out and "hint: pip install debugpy" in out
    assert out.rstrip().endswith("1 failed, 0 warnings")


def test_all_good_exits_0():
    good = dict(REPORT, ok=True, nodes=[dict(REPORT["nodes"][0], checks=[check("gpu", "info")])])
    assert format_report(good).endswith("all good")
    assert run_doctor(Client(good), json_out=True) == 0


def test_node_checks_here_never_raise_and_compare_the_clock():
    import time

    checks = {c["check"]: c for c in node_checks(time.time() - 5)}
    assert checks["clock"]["status"] == "warn" and "+5" in checks["clock"]["detail"]
    assert all(c["status"] in ("ok", "info", "warn", "fail") for c in checks.values())


def test_py_spy_may_read_processes_here_or_says_how_to_allow_it():
    """The real py-spy reads the test's own process, no child of it, as the relay reads a worker."""
    [c] = [c for c in node_checks() if c["check"] == "py-spy"]
    if c["status"] == "ok":
        assert c["detail"] == "py-spy reads processes here (ptrace is allowed)" and c["hint"] is None
    else:  # a machine that refuses ptrace or lacks py-spy: the check says what to do
        assert c["status"] == "warn" and ("SYS_PTRACE" in c["hint"] or "pip install py-spy" in c["hint"])


REFUSED = """
import ctypes, json, os
from raysleuth.probes.checks import node_checks  # first: user nobody may not read this Python's stdlib
import raysleuth.probes.pyspy, subprocess, linecache, importlib.metadata, shutil
os.setgid(65534)
os.setgroups([])
os.setuid(65534)
ctypes.CDLL(None).prctl(4, 0)  # PR_SET_DUMPABLE 0: only CAP_SYS_PTRACE may read this process now
print(json.dumps([c for c in node_checks() if c["check"] == "py-spy"]))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to another user (nobody)")
@pytest.mark.skipif(find_binary() is None, reason="py-spy is not installed next to this Python or on PATH")
@pytest.mark.skipif(not others_may_enter(sys.executable), reason=OTHERS_MAY_NOT_ENTER)
def test_a_node_that_refuses_ptrace_gets_a_warning_naming_the_capability_and_yama():
    out = subprocess.run(
        [sys.executable, "-c", REFUSED],
        env=dict(os.environ, PYTHONPATH=str(BACKEND), PYTHONDONTWRITEBYTECODE="1"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    [c] = json.loads(out.stdout)
    assert c["status"] == "warn" and "ptrace is refused" in c["detail"]
    assert "workers without an agent show no stack" in c["detail"]
    assert "--cap-add SYS_PTRACE" in c["hint"] and "kernel.yama.ptrace_scope" in c["hint"]


HAS_TORCH = importlib.util.find_spec("torch") is not None


def fr_check(**workers_env) -> dict:
    return _flight_recorder(workers_env.get)


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed in this Python")
def test_the_flight_recorder_check_reads_the_workers_environment():
    on = fr_check(TORCH_FR_BUFFER_SIZE="2000")
    assert on["status"] == "ok" and on["detail"].startswith("TORCH_FR_BUFFER_SIZE=2000 in workers (torch 2.")
    assert fr_check(TORCH_NCCL_TRACE_BUFFER_SIZE="500")["status"] == "ok"
    off = fr_check(TORCH_FR_BUFFER_SIZE="0")
    assert off["status"] == "warn" and "is off" in off["detail"]
    assert '"env_vars": {"TORCH_FR_BUFFER_SIZE": "2000"}' in off["hint"]
    unset = fr_check()
    assert unset["status"] == "info" and "not set" in unset["detail"] and "runtime_env" in unset["hint"]
    assert fr_check(TORCH_FR_BUFFER_SIZE="lots")["status"] == "warn"


def test_the_node_checks_never_import_torch():
    """They run in the relay: torch's version is read from its installed metadata only."""
    code = "import sys\nfrom raysleuth.probes.checks import node_checks\nnode_checks()\n"
    code += "print('torch' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=dict(os.environ, PYTHONPATH=str(BACKEND)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


@pytest.mark.skipif(HAS_TORCH, reason="torch is installed in this Python")
def test_without_torch_the_flight_recorder_check_only_informs():
    c = fr_check(TORCH_FR_BUFFER_SIZE="0")
    assert c["status"] == "info" and "torch is not installed here" in c["detail"]


def test_the_pause_timeouts_check_says_how_long_a_train_worker_may_stay_paused():
    from raysleuth.probes.checks import TRAIN_HEALTH_ENV, _pause_timeouts

    unset = _pause_timeouts(lambda key: None)
    assert unset["status"] == "info" and "600 s" in unset["detail"] and TRAIN_HEALTH_ENV in unset["hint"]
    set_ = _pause_timeouts({TRAIN_HEALTH_ENV: "3600"}.get)
    assert f"{TRAIN_HEALTH_ENV}=3600" in set_["detail"] and "timeout=" in set_["hint"]
