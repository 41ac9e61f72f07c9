"""Stacks read from outside with the real py-spy (raysleuth/probes/pyspy.py), on real child processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import OTHERS_MAY_NOT_ENTER, others_may_enter

from raysleuth.probes import pyspy

BACKEND = Path(__file__).resolve().parents[3] / "python_backend"

SLEEPER = """\
import threading, time; print("ready", flush=True)
def inner():
    time.sleep(1000)  # @sleep
def outer():
    inner()
threading.Thread(target=lambda: time.sleep(1000), name="helper", daemon=True).start()
outer()
"""
SLEEP_LINE = 3

needs_pyspy = pytest.mark.skipif(
    pyspy.find_binary() is None, reason="py-spy is not installed next to this Python or on PATH"
)


@pytest.fixture
def sleeper(tmp_path):
    path = tmp_path / "sleeper.py"
    path.write_text(SLEEPER)
    proc = subprocess.Popen([sys.executable, str(path)], stdout=subprocess.PIPE, text=True)
    # py-spy on a process still starting finds no interpreter yet ("Failed to find a python
    # interpreter in the .data section"): dump only once the child says it runs.
    assert proc.stdout.readline().strip() == "ready", "the sleeper did not start"
    yield proc, str(path)
    proc.kill()
    proc.wait()


def main_of(result: dict) -> dict:
    [main] = [t for t in result["threads"] if t["main"]]
    return main


def dump_when_asleep(pid: int, path: str, native: bool = False) -> dict:
    """Dumps until the main thread is seen in its sleep (the child needs a moment to get there)."""
    end = time.monotonic() + 30
    while True:
        result = pyspy.dump(pid, native=native)
        assert result["error"] is None, result
        frames = [f for f in main_of(result)["frames"] if f["path"] == path] if result["threads"] else []
        if frames and frames[0]["line"] == SLEEP_LINE:
            return result
        assert time.monotonic() < end, f"never saw the child asleep: {result}"


@needs_pyspy
def test_a_sleeping_process_is_dumped_innermost_first_with_its_source_lines(sleeper):
    proc, path = sleeper
    result = dump_when_asleep(proc.pid, path)
    assert result["hint"] is None
    main = main_of(result)
    assert main["name"] == "MainThread"
    assert main["frames"] == [
        {"path": path, "line": 3, "function": "inner", "code": "time.sleep(1000)  # @sleep"},
        {"path": path, "line": 5, "function": "outer", "code": "inner()"},
        {"path": path, "line": 7, "function": "<module>", "code": "outer()"},
    ]
    [helper] = [t for t in result["threads"] if t["name"] == "helper"]
    assert helper["main"] is False and isinstance(helper["id"], int)
    assert helper["frames"][0]["function"] == "<lambda>" and helper["frames"][0]["line"] == 6
    # py-spy says "Thread.run"; the agent's stacks say "run": both must group alike.
    assert "run" in [f["function"] for f in helper["frames"]]


@needs_pyspy
def test_native_frames_come_first_without_source_and_the_python_frames_stay(sleeper):
    proc, path = sleeper
    main = main_of(dump_when_asleep(proc.pid, path, native=True))
    first_python = next(i for i, f in enumerate(main["frames"]) if f["path"] == path)
    assert first_python > 0, "the C frames of time.sleep come before the Python frame"
    assert all(f["line"] == 0 and f["code"] is None for f in main["frames"][:first_python])
    assert main["frames"][first_python]["function"] == "inner"


@needs_pyspy
def test_a_process_that_is_gone_says_so():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    result = pyspy.dump(proc.pid)
    assert result["threads"] == [] and f"process {proc.pid} is gone" in result["error"]


@needs_pyspy
def test_a_process_that_is_not_python_says_so():
    proc = subprocess.Popen(["sleep", "1000"])
    try:
        result = pyspy.dump(proc.pid)
    finally:
        proc.kill()
        proc.wait()
    assert result["threads"] == [] and "does not look like a Python process" in result["error"]


@needs_pyspy
def test_a_dump_that_takes_too_long_is_cut_off(sleeper):
    proc, _ = sleeper
    result = pyspy.dump(proc.pid, timeout=0.001)
    assert result["threads"] == [] and "did not answer within 0.001 s" in result["error"]


REFUSED = """
import json, os, sys
from raysleuth.probes import pyspy  # imported first: user nobody may not read this Python's stdlib
os.setgid(65534)
os.setgroups([])
os.setuid(65534)
print(json.dumps(pyspy.dump(int(sys.argv[1]))))
"""


@needs_pyspy
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to another user (nobody)")
@pytest.mark.skipif(not others_may_enter(sys.executable), reason=OTHERS_MAY_NOT_ENTER)
def test_ptrace_refused_says_why_and_names_the_capability_and_yama(sleeper):
    proc, _ = sleeper  # a root process, read by a process of user nobody: the kernel refuses
    out = subprocess.run(
        [sys.executable, "-c", REFUSED, str(proc.pid)],
        env=dict(os.environ, PYTHONPATH=str(BACKEND), PYTHONDONTWRITEBYTECODE="1"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["threads"] == []
    assert result["error"] == f"py-spy may not read pid {proc.pid}: ptrace is refused (permission denied)"
    assert "CAP_SYS_PTRACE" in result["hint"] and "--cap-add SYS_PTRACE" in result["hint"]
    assert "kernel.yama.ptrace_scope" in result["hint"]


def test_a_missing_py_spy_says_where_it_looked_and_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    result = pyspy.dump(os.getpid())
    assert result["threads"] == [] and "py-spy is not installed on this node" in result["error"]
    assert str(tmp_path) in result["error"] and "pip install py-spy" in result["hint"]


def test_the_binary_next_to_this_python_comes_first(tmp_path, monkeypatch):
    fake = tmp_path / "py-spy"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    assert pyspy.find_binary() == str(fake)
