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
        ({"ready": True, "http": "http://[::1\x1b[2J"}, "is not a broker URL"),
    ],
)
def test_a_broken_broker_file_is_a_one_line_error(tmp_path, content, says):
    out = cli("list", "--state-dir", broker_file(tmp_path, content))
    assert out.returncode == 2 and "Traceback" not in out.stderr and says in out.stderr, out.stderr
    assert "internal error" not in out.stderr and "\x1b" not in out.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the file to another user")
def test_another_users_broker_file_is_refused(tmp_path):
    sd = broker_file(tmp_path, {"ready": True, "http": "http://127.0.0.1:9", "pid": os.getpid()})
    os.chown(os.path.join(sd, "broker.json"), 65534, 65534)
    out = cli("list", "--state-dir", sd)
    assert out.returncode == 2 and "Traceback" not in out.stderr and "may have been planted" in out.stderr


# --- #37: bad text in arguments, against a real broker HTTP app; never `internal error` ---------

EVIL_NAME = "\x1b[31mX\nFAKE  ROW"


class EvilTable:
    """The worker table of a cluster where a job named its actor to forge a row."""

    def workers_json(self):
        w = {"id": "0123456789abcdef", "pid": 4242, "node_ip": "127.0.0.1", "node_id": "ab12",
             "actor_class": "Trainer", "actor_name": EVIL_NAME, "state": "running",
             "agent": True}  # fmt: skip
        return [w]


@pytest.fixture
def real_broker(tmp_path):
    """(url, env, state dir) of the broker's real HTTP app with a crash store on a loopback port,
    and the CLI's environment that holds its token."""
    from test_client_discovery import TOKEN, broker_app

    from raysleuth.broker.postmortem.crashes import CrashStore

    sd = tmp_path / "sd"
    sd.mkdir(mode=0o700)
    closed = {"dap": "127.0.0.1:1"}  # a DAP front door nothing listens on: attach fails cleanly
    with broker_app(table=EvilTable(), crashes=CrashStore(tmp_path), status=lambda: closed) as url:
        yield url, {"RAYSLEUTH_TOKEN": TOKEN}, str(sd)


def assert_clean_error(out: subprocess.CompletedProcess) -> None:
    """Non-zero, one `error:` line and a `hint:`, no traceback, nothing a terminal acts on."""
    assert out.returncode != 0, out
    assert "internal error" not in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.startswith("error: ") and out.stderr.count("\n") == 2, out.stderr
    assert "\nhint: " in out.stderr
    assert not any(c in out.stderr + out.stdout for c in "\x1b\r\x9b\u202e"), out.stderr


def test_a_crash_id_with_an_escape_sequence_is_the_brokers_404_escaped(real_broker):
    url, env, sd = real_broker
    out = cli("crashes", "a\x1b[31m", "--broker", url, "--state-dir", sd, env=env)
    assert_clean_error(out)
    assert "No crash record a\\x1b[31m." in out.stderr  # it reached the broker, quoted


def test_a_broker_url_urllib_cannot_split_is_a_one_line_error(tmp_path):
    out = cli("list", "--broker", "http://[::1", "--state-dir", str(tmp_path))
    assert_clean_error(out)
    assert "http://[::1 (from --broker) is not a broker URL" in out.stderr
    out = cli("list", "--state-dir", str(tmp_path), env={"RAYSLEUTH_BROKER": "http://[::1\x1b[2J"})
    assert_clean_error(out)
    assert "(from RAYSLEUTH_BROKER)" in out.stderr and "\\x1b[2J" in out.stderr


def test_an_argument_that_is_not_utf8_is_a_one_line_error(real_broker):
    url, env, sd = real_broker
    job = os.fsdecode(b"\xff")  # what Python makes of the byte 0xff in argv
    out = cli("collectives", "--job", job, "--broker", url, "--state-dir", sd, env=env)
    assert_clean_error(out)
    assert "The argument '\\xff' (job) is not UTF-8 text." in out.stderr


def test_unrecognized_arguments_are_echoed_escaped():
    out = cli("list", "\x1b[31mX")
    assert out.returncode == 2 and "unrecognized arguments: \\x1b[31mX" in out.stderr
    assert "\x1b" not in out.stderr


def test_list_prints_an_actor_name_that_forges_a_row_as_one_escaped_line(real_broker):
    url, env, sd = real_broker
    out = cli("list", "--broker", url, "--state-dir", sd, env=env)
    assert out.returncode == 0, out.stderr
    rows = out.stdout.splitlines()
    assert len(rows) == 2 and "Trainer '\\x1b[31mX\\nFAKE  ROW'" in rows[1], out.stdout
    assert "\x1b" not in out.stdout
    raw = cli("list", "--json", "--broker", url, "--state-dir", sd, env=env)
    assert "\x1b" not in raw.stdout and json.loads(raw.stdout)[0]["actor_name"] == EVIL_NAME


BAD_VALUES = ["\x1b[31mX\nY", os.fsdecode(b"a\xff"), "\u202e", "9" * 400, "-1", "http://[::1", "", "%zz/../"]
"""Control characters, a non-UTF-8 byte, a bidi override, a huge number, a bad URL, nothing."""

COMMANDS = [
    ["list", "--broker", "{}"], ["attach", "{}"], ["attach", "--rank", "{}"], ["attach", "w", "--job", "{}"],
    ["break", "{}"], ["break", "{}:3"], ["break", "a.py:{}"], ["break", "a.py:3", "--ranks", "{}"],
    ["break", "a.py:3", "--if", "{}"], ["break", "a.py:3", "--hit", "{}", "--log", "{}"],
    ["break", "a.py:3", "--group", "{}"], ["break", "--clear", "{}"], ["break", "--remove", "{}:1"],
    ["logs", "--state-dir", "{}"], ["crashes", "{}"], ["cases", "{}"], ["collectives", "--job", "{}"],
    ["rerun", "{}"], ["group", "{}"], ["group", "{}", "--ranks", "{}"], ["group", "g", "--workers", "{}"],
    ["group", "{}", "--delete"], ["group", "g", "--expression", "{}", "--job", "{}"],
    ["watch", "{}", "x"], ["watch", "a.py:3", "{}", "--ranks", "{}"],
    ["watch", "a.py:3", "x", "--every", "{}"],
    ["events", "--since", "{}"], ["events", "--name", "{}"], ["events", "--export", "/nonexistent/{}"],
    ["inspect", "{}"], ["inspect", "x", "--step", "{}"], ["inspect", "--rtol", "{}"],
    ["stacks", "--job", "{}"], ["stacks", "--ranks", "{}"], ["stacks", "--workers", "{}", "--timeout", "{}"],
    ["doctor", "--broker", "{}"],
]  # fmt: skip


def test_every_subcommand_with_bad_arguments_is_a_clean_error_or_an_answer(real_broker, capsys):
    """The fuzz of #37, in process for speed (the subprocess tests above prove the entry point):
    each bad value in each argument of each command; argparse's own refusal (exit 2) counts."""
    from raysleuth.cli import main

    url, env, sd = real_broker
    os.environ.update(env)
    try:
        for template in COMMANDS:
            for value in BAD_VALUES:
                argv = [a.replace("{}", value) for a in template]
                if "--broker" not in argv:
                    argv += ["--broker", url]
                if "--state-dir" not in argv:
                    argv += ["--state-dir", sd]
                try:
                    rc = main(argv)
                except SystemExit as exc:  # argparse: usage and `error:`, status 2
                    rc = exc.code
                out = capsys.readouterr()
                said = out.out + out.err
                assert "internal error" not in said and "Traceback" not in said, (argv, said)
                assert not any(c in said for c in "\x1b\r\u202e"), (argv, said)
                assert rc == 0 or out.err.startswith(("error: ", "usage: ")), (argv, said)
    finally:
        os.environ.pop("RAYSLEUTH_TOKEN", None)
