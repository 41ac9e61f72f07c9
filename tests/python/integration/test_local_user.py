"""Another local user on a shared head node (#23), tried as `nobody` against real workers: no
socket of a worker lets them in, before, during and after a debug session.

Runs as root (to become `nobody` with runuser); skipped with the reason where it cannot."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import psutil
import pytest
import ranked_job
import ray
from helpers import FIXTURES, dap_address, marker_line, run_probe, stopped_frames, wait_until

from raysleuth.dap.client import open_session

JOB = str(FIXTURES / "ranked_job.py")
STEP_LINE = marker_line(JOB, "step-loop")
KNOCK = (FIXTURES / "dap_knock.py").read_text()
SYSTEM_PYTHON = "/usr/bin/python3"

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("runuser") or not os.path.exists(SYSTEM_PYTHON),
    reason="needs root, runuser and /usr/bin/python3 to try the workers' sockets as `nobody`",
)


def knock_as_nobody(targets: list) -> list[dict]:
    out = subprocess.run(
        ["runuser", "-u", "nobody", "--", SYSTEM_PYTHON, "-c", KNOCK, json.dumps(targets)],
        capture_output=True, text=True, timeout=120, check=True, cwd="/",
    )  # fmt: skip
    return json.loads(out.stdout)


def listening(pid: int) -> list:
    """Every socket the process listens on: TCP (any address) and AF_UNIX with a path."""
    proc = psutil.Process(pid)
    conns = getattr(proc, "net_connections", None) or proc.connections
    out = []
    for c in conns(kind="inet"):
        if c.status == psutil.CONN_LISTEN:
            host = "127.0.0.1" if c.laddr.ip in ("0.0.0.0", "::") else c.laddr.ip
            out.append(["tcp", host, c.laddr.port])
    out += [["unix", c.laddr] for c in conns(kind="unix") if isinstance(c.laddr, str) and c.laddr]
    return [list(t) for t in dict.fromkeys(map(tuple, out))]


def let_in(results: list[dict]) -> list[dict]:
    """The sockets that answered a DAP request with success."""
    return [r for r in results if any(a.get("success") for a in r.get("answers", []))]


CONTROL = """
import debugpy, json, os, subprocess
host, port = debugpy.listen(("127.0.0.1", 0), in_process_debug_adapter=True)
knock = ["runuser", "-u", "nobody", "--", PYTHON, "-c", KNOCK, json.dumps([["tcp", host, port]])]
print(subprocess.run(knock, capture_output=True, text=True, timeout=60, cwd="/").stdout.strip())
os._exit(0)
"""


def test_the_knock_sees_a_debugger_without_a_token():
    """The control: a plain debugpy listener (what workers had after a session) lets `nobody` in."""
    pytest.importorskip("debugpy")
    res = run_probe(f"PYTHON, KNOCK = {SYSTEM_PYTHON!r}, {KNOCK!r}\n{CONTROL}")
    assert let_in(res) and res[0]["answers"][0]["command"] == "initialize", res


async def test_no_worker_socket_lets_another_user_in_before_during_or_after_a_session(broker, client):
    cls = ray.remote(num_cpus=1)(ranked_job.RankedTrainer)
    actor = cls.remote(300, 1)
    pid = ray.get(actor.pid.remote())
    try:
        listed = lambda: any(w["pid"] == pid and w["rank"] == 300 for w in client.workers())  # noqa: E731
        wait_until(listed, 15, message="rank 300 listed")
        before = listening(pid)
        assert before and not let_in(knock_as_nobody(before)), before  # Ray's own ports
        host, port = dap_address(broker)
        points = {JOB: [{"line": STEP_LINE}]}
        s = await open_session(host, port, {"token": broker.token, "rank": 300}, breakpoints=points)
        try:
            ref = actor.step.remote(2)
            tid, _ = await stopped_frames(s)
            during = listening(pid)
            assert len(during) > len(before), "the worker's debugpy listener is not among its sockets"
            tried = knock_as_nobody(during)
            assert not let_in(tried), tried
            # The debugger's own socket: AF_UNIX in a folder `nobody` cannot enter.
            ours = [r for r in tried if r["target"][0] == "unix" and "rs-dbg-" in r["target"][1]]
            (ours,) = ours
            assert "Permission denied" in ours["error"], ours
            await s.request("setBreakpoints", {"source": {"path": JOB}, "breakpoints": []})
            await s.request("continue", {"threadId": tid})
            await ref
        finally:
            await s.request("disconnect", {}, check=False)
            await s.close()
        after = listening(pid)
        tried = knock_as_nobody(after)
        assert not let_in(tried), tried
        # The broker still reaches it: a new session attaches and evaluates.
        s = await open_session(host, port, {"token": broker.token, "rank": 300})
        try:
            threads = await s.request("threads", {})
            assert threads["body"]["threads"]
        finally:
            await s.request("disconnect", {}, check=False)
            await s.close()
    finally:
        ray.kill(actor)
