"""The audit log (#37): private, append-only, bounded, never following a planted link; the CLI
shows it escaped; ending a worker touches only a Ray worker of ours. Real files, real processes."""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import time

import pytest

from raysleuth.broker.audit import AuditLog
from raysleuth.cli.audit import format_entry
from raysleuth.cli.evaluate import code_of_entry, confirm_unbounded
from raysleuth.probes.endworker import end_ray_worker
from raysleuth.shared.errors import BadRequest, SleuthError


def test_each_record_is_one_json_line_in_a_0600_file(tmp_path):
    log = AuditLog(tmp_path, clock=lambda: 1700000000.5)
    log.record(
        "evaluate", client={"address": "127.0.0.1:5", "uid": 0, "pid": 42}, expression="x\n1", workers=["w0"]
    )
    log.record("attach", client=None, expression=None, workers=["w1"], ranks=[3])
    lines = log.path.read_text().splitlines()
    assert len(lines) == 2 and stat.S_IMODE(os.lstat(log.path).st_mode) == 0o600
    first = json.loads(lines[0])
    assert first == {
        "time": 1700000000.5, "action": "evaluate", "expression": "x\n1", "workers": ["w0"],
        "client": {"address": "127.0.0.1:5", "uid": 0, "pid": 42},
    }  # fmt: skip
    assert log.tail(1) == [json.loads(lines[1])]


def test_the_log_stays_within_its_bound(tmp_path):
    log = AuditLog(tmp_path, max_bytes=4000)
    for i in range(300):
        log.record("evaluate", client=None, expression=f"x{i}" + "y" * 40, workers=["w"])
    total = log.path.stat().st_size + log.old.stat().st_size
    assert total <= 4000
    tail = log.tail(5)
    assert [e["expression"][:4] for e in tail] == ["x295", "x296", "x297", "x298", "x299"]


def test_a_planted_link_is_not_followed(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_text("precious\n")
    (tmp_path / "audit.log").symlink_to(target)
    AuditLog(tmp_path).record("evaluate", client=None, expression="x", workers=[])
    assert target.read_text() == "precious\n"


def test_the_cli_shows_entries_escaped_on_one_line():
    entry = {
        "time": time.time(), "action": "evaluate", "client": {"uid": 0, "pid": 7, "address": "127.0.0.1:9"},
        "expression": "print('\x1b[31mred')\nfake line", "workers": ["abcdef0123"], "ranks": [0, 3],
    }  # fmt: skip
    text = format_entry(entry)
    assert "\x1b" not in text and "\n" not in text
    assert "\\x1b[31mred" in text and "uid 0, pid 7" in text and "ranks 0,3" in text
    point = {"time": 1.0, "action": "breakpoint", "client": {"address": "10.0.0.2:4"}, "path": "/t.py",
             "line": 3, "scope": "rank 0", "expression": "step == 1", "force": True}  # fmt: skip
    assert "breakpoint (forced)  10.0.0.2:4  /t.py:3 [rank 0]  step == 1" in format_entry(point)


class Tty(io.StringIO):
    def isatty(self):
        return True


def test_the_cli_asks_before_sending_unbounded_code():
    assert confirm_unbounded(["loss", None], force=False) is False  # nothing flagged: no question
    assert confirm_unbounded(["sum(range(10**12))"], force=True) is True
    with pytest.raises(BadRequest) as no_tty:
        confirm_unbounded(["sum(range(10**12))"], force=False, stdin=io.StringIO("y\n"), out=io.StringIO())
    assert "--force" in no_tty.value.hint
    out = Tty()
    assert confirm_unbounded(["sum(range(10**12))"], False, stdin=Tty("y\n"), out=out) is True
    assert out.getvalue().endswith("Send it anyway? [y/N] ")
    with pytest.raises(SleuthError, match="Not sent"):
        confirm_unbounded(["sum(range(10**12))"], False, stdin=Tty("\n"), out=Tty())
    assert code_of_entry({"condition": "[rank 0] sum(range(10**9))", "logMessage": "a={a} b={b}"}) == [
        "sum(range(10**9))", "a", "b",
    ]  # fmt: skip


def test_ending_a_worker_ends_only_a_ray_worker_of_ours():
    assert end_ray_worker(os.getpid())["ok"] is False  # not titled ray::
    proc = subprocess.Popen(["bash", "-c", 'exec -a "ray::Trainer.step" sleep 60'])
    try:
        deadline = time.monotonic() + 5
        while not open(f"/proc/{proc.pid}/cmdline", "rb").read().startswith(b"ray::"):
            assert time.monotonic() < deadline, "the title never showed"
            time.sleep(0.01)
        assert end_ray_worker(proc.pid) == {"ok": True}
        assert proc.wait(5) == -9
    finally:
        proc.kill()
    assert end_ray_worker(proc.pid)["ok"] is False  # gone
