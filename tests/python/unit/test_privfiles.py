"""Private by default (#23): whatever a state dir held before, the broker's files in it are
0600 and its folders 0700, and another local user (`nobody`) reads none of them; a state dir that
others can write or another user owns is refused."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from raysleuth.broker.auth import load_or_create_token
from raysleuth.broker.connect import write_json
from raysleuth.broker.points.service import PointSet
from raysleuth.broker.postmortem.crashes import CrashStore
from raysleuth.shared.errors import SleuthError
from raysleuth.shared.privfiles import open_private_append, secure_state_dir

AS_NOBODY = os.geteuid() == 0 and shutil.which("runuser") and os.path.exists("/usr/bin/python3")
READ_ALL = """
import json, os, sys
out = {}
for root, dirs, files in os.walk(sys.argv[1]):
    for name in files:
        p = os.path.join(root, name)
        try:
            out[p] = open(p).read()[:40]
        except OSError as exc:
            out[p] = exc.strerror
    out[root + "/"] = "listed"
print(json.dumps(out))
"""


@pytest.fixture
def open_dir():
    """A state dir made 0755 beforehand, with a record written 0644 by an older version, under a
    folder everyone can enter (pytest's own tmp dirs are 0700)."""
    top = Path(tempfile.mkdtemp(prefix="rs-priv-", dir="/tmp"))
    os.chmod(top, 0o755)
    sd = top / "state"
    (sd / "crashes").mkdir(parents=True)
    for d in (sd, sd / "crashes"):
        os.chmod(d, 0o755)
    old = sd / "crashes" / "20260101-000000-old.json"
    old.write_text(json.dumps({"id": "20260101-000000-old", "kind": "exception", "frames": []}))
    os.chmod(old, 0o644)
    yield sd
    shutil.rmtree(top)


def fill_like_a_broker(sd: Path) -> list[str]:
    fixed = secure_state_dir(sd)
    load_or_create_token(sd)
    write_json(sd / "broker.json", {"ready": True})
    with open_private_append(sd / "broker.log") as log:
        log.write(b"started\n")
    secret = {"path": "/job.py", "line": 3, "function": "f", "locals": {"api_key": "'sk-SECRET'"}}
    CrashStore(sd).add({"kind": "exception", "exc_type": "ValueError", "frames": [secret]})
    PointSet(sd).put_file({"path": "/job.py", "breakpoints": [{"line": 3}]})
    return fixed


def test_every_file_is_private_whatever_the_dir_held_before(open_dir, monkeypatch):
    monkeypatch.delenv("RAYSLEUTH_TOKEN", raising=False)
    fixed = fill_like_a_broker(open_dir)
    assert sorted(f.split(": ")[1] for f in fixed) == ["644 -> 600", "755 -> 700", "755 -> 700"]
    files = [Path(r) / f for r, _, fs in os.walk(open_dir) for f in fs]
    assert {p.name for p in files} >= {"token", "broker.json", "broker.log", "breakpoints.json"}
    for p in files:
        assert stat.S_IMODE(p.stat().st_mode) == 0o600, p
    for d in (open_dir, open_dir / "crashes"):
        assert stat.S_IMODE(d.stat().st_mode) == 0o700, d
    assert secure_state_dir(open_dir) == []  # nothing left to fix


@pytest.mark.skipif(not AS_NOBODY, reason="needs root, runuser and /usr/bin/python3 to read as `nobody`")
def test_another_local_user_reads_nothing(open_dir, monkeypatch):
    monkeypatch.delenv("RAYSLEUTH_TOKEN", raising=False)
    fill_like_a_broker(open_dir)
    out = subprocess.run(
        ["runuser", "-u", "nobody", "--", "/usr/bin/python3", "-c", READ_ALL, str(open_dir)],
        capture_output=True, text=True, timeout=60, check=True, cwd="/",
    )  # fmt: skip
    seen = json.loads(out.stdout)
    assert "SECRET" not in out.stdout and seen == {}, seen  # not even the folder can be listed


def test_a_state_dir_others_can_write_or_another_user_owns_is_refused(tmp_path):
    sd = tmp_path / "shared"
    sd.mkdir()
    os.chmod(sd, 0o777)
    with pytest.raises(SleuthError, match="Others can write the state dir") as err:
        secure_state_dir(sd)
    assert "chmod 700" in err.value.hint and stat.S_IMODE(sd.stat().st_mode) == 0o777  # left alone
    f = tmp_path / "a-file"
    f.write_text("x")
    with pytest.raises(SleuthError, match="is not a folder"):
        secure_state_dir(f)
    if os.geteuid() == 0:
        other = tmp_path / "theirs"
        other.mkdir(mode=0o700)
        os.chown(other, 65534, 65534)
        with pytest.raises(SleuthError, match="belongs to uid 65534"):
            secure_state_dir(other)
