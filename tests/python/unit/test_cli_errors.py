"""Every bad input on the command line is one `error:` line and a `hint:`, exit status 2, never
a traceback (#23): the real CLI in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("RAYSLEUTH")}
    return subprocess.run(
        [sys.executable, "-m", "raysleuth", *args],
        capture_output=True, text=True, timeout=60, env={**base, **(env or {})}, check=False,
    )  # fmt: skip


def broker_file(tmp_path, content) -> str:
    sd = tmp_path / "sd"
    sd.mkdir(mode=0o700)
    (sd / "broker.json").write_text(content if isinstance(content, str) else json.dumps(content))
    os.chmod(sd / "broker.json", 0o600)
    return str(sd)


CASES = {
    "export to a missing folder": (
        ["events", "--export", "/nonexistent/d/t.json", "--broker", "http://127.0.0.1:9"],
        None,
    ),
    "state dir is a file": (["list", "--state-dir", "/etc/passwd"], "is not a folder"),
    "broker is no URL": (["list", "--broker", "notaurl"], "is not a broker URL"),
    "broker state dir is a file": (["broker", "--state-dir", "/etc/passwd"], "is not a folder"),
    "broker state dir in /proc": (["broker", "--state-dir", "/proc/x"], "Cannot make the state dir"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_arguments_are_one_line_errors(case):
    args, says = CASES[case]
    out = cli(*args)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.startswith("error: ") and "\nhint: " in out.stderr, out.stderr
    if says:
        assert says in out.stderr


@pytest.mark.parametrize(
    "content, says",
    [
        ({"ready": True}, 'needs an "http" address'),
        ([1, 2], 'needs an "http" address'),
        ("{oops", "not valid JSON"),
    ],
)
def test_a_broken_broker_file_is_a_one_line_error(tmp_path, content, says):
    out = cli("list", "--state-dir", broker_file(tmp_path, content))
    assert out.returncode == 2 and "Traceback" not in out.stderr and says in out.stderr, out.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the file to another user")
def test_another_users_broker_file_is_refused(tmp_path):
    sd = broker_file(tmp_path, {"ready": True, "http": "http://127.0.0.1:9", "pid": os.getpid()})
    os.chown(os.path.join(sd, "broker.json"), 65534, 65534)
    out = cli("list", "--state-dir", sd)
    assert out.returncode == 2 and "Traceback" not in out.stderr and "may have been planted" in out.stderr
