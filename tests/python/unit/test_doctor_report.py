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


def site_dir_venv(tmp_path: Path) -> Path:
    """A real virtualenv in `tmp_path` that reaches this one's packages (raysleuth, its hook) only
    through a .pth calling site.addsitedir, as users point a job's virtualenv at a shared one."""
    import sysconfig

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.strip()  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RAYSLEUTH")}
    alone = subprocess.run([str(python), "-c", "import raysleuth"], env=env, capture_output=True, timeout=60)
    assert alone.returncode != 0  # not reachable until the site dir is added
    ours = sysconfig.get_paths()["purelib"]
    (Path(purelib) / "reach_shared.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    return python


AGENT_CHECK = """
import json
from raysleuth.probes.checks import _agent
print(json.dumps(_agent({"RAYSLEUTH": "1"}.get)))
"""


def test_doctor_finds_the_hook_in_a_site_dir_a_virtualenv_adds(tmp_path):
    """Issue 38: every worker of such a virtualenv ran the agent, and doctor said FAIL "start-up
    hook is not installed" (it looked for raysleuth.pth in the interpreter's own site-packages)."""
    import sysconfig

    python = site_dir_venv(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RAYSLEUTH")}
    out = subprocess.run(
        [str(python), "-c", AGENT_CHECK], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    c = json.loads(out.stdout)
    ours = sysconfig.get_paths()["purelib"]
    assert c["status"] == "ok", c
    assert c["detail"] == (
        f"workers start the agent: RAYSLEUTH=1, raysleuth.pth in {ours}, a site dir added by site.addsitedir"
    )


def test_a_hook_on_the_path_that_python_never_runs_is_named_with_the_fix(tmp_path):
    """raysleuth.pth in a folder on PYTHONPATH: on sys.path, but .pth files run only in site dirs."""
    from raysleuth.probes.checks import _agent

    found = {"ran": False, "pth": [str(tmp_path)], "error": None}
    c = _agent({"RAYSLEUTH": "1"}.get, probe=lambda: found)
    assert c["status"] == "fail" and "does not run it at start-up" in c["detail"]
    assert f"site.addsitedir({str(tmp_path)!r})" in c["hint"]
    missing = _agent({"RAYSLEUTH": "1"}.get, probe=lambda: {"ran": False, "pth": [], "error": None})
    assert missing["status"] == "fail" and "start-up hook is not installed" in missing["detail"]
    assert "worker_process_setup_hook" in missing["hint"]


async def test_doctor_reports_what_the_workers_run_not_only_the_files():
    """A node whose interpreter shows no hook, but whose workers all run the agent (here through
    the runtime_env setup hook): "2 of 2 workers here run the agent", not a failure."""
    from broker_fakes import FakeRelay, FakeRelays, FakeTable, Remote, worker

    from raysleuth.broker.radar.doctor import Doctor

    table = FakeTable([worker("w1"), worker("w2"), worker("w3", node_id="node2", agent=False)])
    table.reports = [{"id": "w1", "agent_source": "setup_hook"}, {"id": "w2", "agent_source": "env"}]
    relay = FakeRelay()
    relay.doctor = Remote(
        lambda t: [check("agent", "fail", "raysleuth's start-up hook is not installed", "h")]
    )
    report = await Doctor(table, FakeRelays(relay), lambda: ("127.0.0.1", "u", "d")).report()
    [agent] = report["nodes"][0]["checks"]
    assert agent["status"] == "ok" and report["ok"], agent
    assert agent["detail"].endswith(
        "; 2 of 2 workers here run the agent (1 through RAYSLEUTH=1 and raysleuth.pth, "
        "1 through the runtime_env setup hook)"
    )
    workers = {c["check"]: c for c in report["broker"]}["workers"]
    assert workers["status"] == "warn" and workers["detail"].startswith("2 of 3 workers run the agent")
    table.reports = []
    table._workers[1].agent = False  # one of node1's two runs no agent: still a finding there
    [agent] = (await Doctor(table, FakeRelays(relay), lambda: ("127.0.0.1", "u", "d")).report())["nodes"][0][
        "checks"
    ]
    assert (
        agent["status"] == "warn"
        and "1 of 2 workers here run the agent (1 through its agent)" in agent["detail"]
    )
