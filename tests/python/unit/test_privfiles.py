"""Private by default (#23): whatever a state dir held before, the broker's files in it are
0600 and its folders 0700, and another local user (`nobody`) reads none of them; a state dir that
others can write or another user owns is refused. No link is followed (#37): a state dir that is
a link, or under a folder another user owns, is refused, and nothing is chmod'ed or written
through a link."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from raysleuth.broker.auth import load_or_create_token
from raysleuth.broker.connect import write_json
from raysleuth.broker.points.service import PointSet
from raysleuth.broker.postmortem.crashes import CrashStore
from raysleuth.shared.errors import SleuthError
from raysleuth.shared.privfiles import (
    check_state_dir,
    create_exclusive,
    open_private_append,
    private_dir,
    secure_state_dir,
    write_private,
)

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


# --- no link followed, nothing chmod'ed that is not ours (#37) ---------------------------------

AS_NOBODY_REASON = "needs root, runuser and /usr/bin/python3 to plant files as `nobody`"


def as_nobody(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["runuser", "-u", "nobody", "--", "/usr/bin/python3", "-c", code, *args],
        capture_output=True, text=True, timeout=60, check=True, cwd="/",
    )  # fmt: skip


@pytest.fixture
def shared_and_victim():
    """`pub`: a 1777 folder anyone can make entries in (a shared /scratch); `victim`: a root-owned
    0755 folder holding a 0644 file and a 0755 folder (think /etc)."""
    pub = Path(tempfile.mkdtemp(prefix="rs-pub-", dir="/tmp"))
    os.chmod(pub, 0o1777)
    victim = Path(tempfile.mkdtemp(prefix="rs-victim-", dir="/tmp"))
    (victim / "conf.d").mkdir()
    (victim / "passwd").write_text("root:x:0:0\n")
    for p, mode in ((victim, 0o755), (victim / "conf.d", 0o755), (victim / "passwd", 0o644)):
        os.chmod(p, mode)
    yield pub, victim
    shutil.rmtree(pub)
    shutil.rmtree(victim)


def modes(folder: Path) -> dict:
    found = {str(folder): stat.S_IMODE(folder.lstat().st_mode)}
    for root, dirs, files in os.walk(folder):
        for n in dirs + files:
            found[os.path.join(root, n)] = stat.S_IMODE(os.lstat(os.path.join(root, n)).st_mode)
    return found


def run_broker(state_dir: str) -> subprocess.CompletedProcess:
    """`raysleuth broker --state-dir` as root, against an address nothing listens on (whatever
    it does to the state dir happens before it looks for Ray)."""
    env = {k: v for k, v in os.environ.items() if k not in ("RAYSLEUTH_TOKEN", "RAYSLEUTH")}
    cmd = [sys.executable, "-m", "raysleuth", "broker", "--state-dir", state_dir, "--address", "127.0.0.1:9"]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30, env=env, cwd="/")
    except subprocess.TimeoutExpired as exc:  # it went on to Ray: the state dir was taken
        return subprocess.CompletedProcess(cmd, -9, "", str(exc.stderr))


@pytest.mark.skipif(not AS_NOBODY, reason=AS_NOBODY_REASON)
def test_a_state_dir_that_another_user_linked_to_a_root_folder_is_refused_and_the_folder_untouched(
    shared_and_victim, monkeypatch
):
    monkeypatch.delenv("RAYSLEUTH_TOKEN", raising=False)
    pub, victim = shared_and_victim
    link = pub / "rs-state"
    as_nobody("import os, sys; os.symlink(sys.argv[1], sys.argv[2])", str(victim), str(link))
    assert link.is_symlink() and link.lstat().st_uid != 0
    before = modes(victim)
    out = run_broker(str(link))
    assert out.returncode == 2, (out.returncode, out.stderr)
    lines = out.stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: "), out.stderr
    assert "symbolic link" in lines[0] and "Traceback" not in out.stderr
    assert modes(victim) == before == {
        str(victim): 0o755, str(victim / "conf.d"): 0o755, str(victim / "passwd"): 0o644
    }  # fmt: skip
    # The library calls the broker makes refuse it too, and write nothing through the link.
    for call in (secure_state_dir, load_or_create_token, check_state_dir):
        with pytest.raises(SleuthError, match="symbolic link"):
            call(link)
    assert modes(victim) == before and not (victim / "token").exists()


@pytest.mark.skipif(not AS_NOBODY, reason=AS_NOBODY_REASON)
def test_a_state_dir_of_another_user_or_under_their_folder_is_refused(shared_and_victim, monkeypatch):
    monkeypatch.delenv("RAYSLEUTH_TOKEN", raising=False)
    pub, _ = shared_and_victim
    theirs, above = pub / "theirs", pub / "nb"
    as_nobody("import os, sys; [os.mkdir(p, 0o755) for p in sys.argv[1:]]", str(theirs), str(above))
    out = run_broker(str(theirs))
    assert out.returncode == 2 and "belongs to uid 65534, not to you" in out.stderr, out.stderr
    # Under a folder nobody owns: they could rename our state dir away and put a link there.
    sd = above / "state"
    out = run_broker(str(sd))
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert f"the folder {above} above it belongs to uid 65534" in out.stderr, out.stderr
    assert not sd.exists()
    with pytest.raises(SleuthError, match="above it belongs to uid 65534"):
        secure_state_dir(sd / "deeper")
    assert not sd.exists()


def test_a_link_anywhere_inside_the_state_dir_is_neither_followed_nor_chmoded(tmp_path):
    sd, outside = tmp_path / "state", tmp_path / "outside"
    sd.mkdir(mode=0o700)
    outside.mkdir(mode=0o755)
    (outside / "f").write_text("x")
    os.chmod(outside / "f", 0o644)
    (sd / "crashes").symlink_to(outside)
    (sd / "file-link").symlink_to(outside / "f")
    os.mkfifo(sd / "fifo", 0o644)  # opened for a chmod it would block: left alone
    before = modes(outside)
    assert secure_state_dir(sd) == []
    assert modes(outside) == before and stat.S_IMODE((sd / "fifo").lstat().st_mode) == 0o644
    with pytest.raises(SleuthError, match="symbolic link"):
        private_dir(sd / "crashes")
    assert modes(outside) == before


def test_files_are_created_exclusively_never_through_what_was_there(tmp_path):
    target = tmp_path / "target"
    target.write_text("keep")
    planted = tmp_path / "planted"
    planted.symlink_to(target)
    for path in (planted, target):
        with pytest.raises(FileExistsError):
            os.close(create_exclusive(path))
    assert target.read_text() == "keep"
    with pytest.raises(OSError):  # a log opened for appending: no link either
        open_private_append(planted)
    write_private(tmp_path / "new", "x")
    assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new", "planted", "target"]  # no tmp left


def test_a_crash_record_under_a_linked_crashes_folder_is_not_written_there(tmp_path):
    """The crash store catches OSError: a refused folder is one too (logged, nothing written)."""
    sd, outside = tmp_path / "state", tmp_path / "outside"
    sd.mkdir(mode=0o700)
    outside.mkdir(mode=0o755)
    (sd / "crashes").symlink_to(outside)
    CrashStore(sd).add({"kind": "exception", "exc_type": "ValueError", "frames": []})
    assert list(outside.iterdir()) == []
