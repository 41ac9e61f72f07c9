"""The agent's log is a private, exclusive file (#37): `nobody` pre-creates the name a root
process would log to (the old `/tmp/raysleuth-agent-<pid>.log`, or that name in Ray's 0777 log
folder) as a 0666 file or a link, and reads what that process logs (an exception text with an API
key). Now the log is created O_CREAT|O_EXCL|O_NOFOLLOW 0600, outside Ray in a 0700 folder of
ours, and a planted file or link is never opened.

A real agent logger in a fresh interpreter, a real `nobody` (runuser)."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("runuser") or not os.path.exists("/usr/bin/python3"),
    reason="needs root, runuser and /usr/bin/python3 to plant files and read logs as `nobody`",
)

SECRET = "sk-LIVE-0123456789"

# Prints its pid, waits until the test planted its files, then logs an exception with a secret
# through the agent's logger (as a failing agent step would) and says where the record went.
PROBE = """
import json, os, sys
ray_folder = sys.argv[1]
if ray_folder:  # stands in for Ray's session log folder (0777, made by Ray)
    import raysleuth.shared.paths as paths
    paths.ray_log_dir = lambda: ray_folder
print(os.getpid(), flush=True)
sys.stdin.readline()
from raysleuth.agent.log import agent_logger, swallow
try:
    raise ValueError("request failed for api_key=SECRET")
except ValueError:
    swallow("calling the service")
stream = agent_logger().handlers[0].stream
stream.flush()
print(json.dumps({"log": os.readlink(f"/proc/self/fd/{stream.fileno()}")}), flush=True)
""".replace("SECRET", SECRET)

READ = """
import json, sys
out = {}
for p in sys.argv[1:]:
    try:
        out[p] = open(p).read()
    except OSError as exc:
        out[p] = exc.strerror
print(json.dumps(out))
"""


def as_nobody(code: str, *args: str) -> str:
    cmd = ["runuser", "-u", "nobody", "--", "/usr/bin/python3", "-c", code, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=True, cwd="/").stdout


@pytest.fixture
def pub():
    """A folder everyone may write, like /tmp or Ray's log folder (0777 and 1777)."""
    folder = Path(tempfile.mkdtemp(prefix="rs-pub-", dir="/tmp"))
    os.chmod(folder, 0o1777)
    yield folder
    shutil.rmtree(folder)


def log_with_planted(pub: Path, state: Path, ray_folder: str, plant) -> tuple[dict, int]:
    env = {k: v for k, v in os.environ.items() if k not in ("RAYSLEUTH", "XDG_RUNTIME_DIR")}
    env.update(TMPDIR=str(pub), RAYSLEUTH_STATE_DIR=str(state))
    proc = subprocess.Popen(
        [sys.executable, "-c", PROBE, ray_folder],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd="/",
    )  # fmt: skip
    try:
        pid = int(proc.stdout.readline())
        plant(pid)
        out, _ = proc.communicate("go\n", timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
    return json.loads(out.strip().splitlines()[-1]), pid


PLANT_FILE = "import os, sys; os.close(os.open(sys.argv[1], os.O_CREAT, 0o666)); os.chmod(sys.argv[1], 0o666)"
PLANT_LINK = "import os, sys; os.symlink(sys.argv[2], sys.argv[1])"


def test_outside_ray_the_log_is_in_a_private_folder_and_the_old_tmp_name_is_never_opened(pub, tmp_path):
    state = tmp_path / "state"
    planted: list[str] = []

    def plant(pid: int) -> None:  # the name the agent logged to before, in the temp folder
        planted.append(str(pub / f"raysleuth-agent-{pid}.log"))
        as_nobody(PLANT_FILE, planted[0])

    res, pid = log_with_planted(pub, state, "", plant)
    log = Path(res["log"])
    seen = json.loads(as_nobody(READ, planted[0], str(log)))
    assert seen[planted[0]] == "", "the planted file got the record"
    assert seen[str(log)] == "Permission denied", seen
    assert SECRET in log.read_text()  # the record is there, for its owner
    folder = log.parent
    assert folder == state / "agent-logs" and not str(log).startswith(str(pub))
    for p, mode in ((folder, 0o700), (log, 0o600)):
        st = p.lstat()
        assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, mode), p
    assert stat.S_ISDIR(folder.lstat().st_mode) and stat.S_ISREG(log.lstat().st_mode)
    assert stat.S_IMODE(state.lstat().st_mode) == 0o700
    assert sorted(os.listdir(pub)) == [f"raysleuth-agent-{pid}.log"]  # nothing else in "/tmp"


@pytest.mark.parametrize("kind", ["file", "link"])
def test_in_rays_open_log_folder_a_planted_file_or_link_is_never_opened(pub, tmp_path, kind):
    victim = tmp_path / "victim"
    victim.write_text("root's file\n")
    os.chmod(victim, 0o644)
    planted: list[str] = []

    def plant(pid: int) -> None:  # Ray's log folder is 0777: anyone can put the next name there
        planted.append(str(pub / f"raysleuth-agent-{pid}.log"))
        as_nobody(PLANT_FILE if kind == "file" else PLANT_LINK, planted[0], str(victim))

    res, pid = log_with_planted(pub, tmp_path / "state", str(pub), plant)
    log = Path(res["log"])
    assert log.parent == pub and re.fullmatch(rf"raysleuth-agent-{pid}-[0-9a-f]{{16}}\.log", log.name), log
    assert victim.read_text() == "root's file\n" and stat.S_IMODE(victim.stat().st_mode) == 0o644
    seen = json.loads(as_nobody(READ, planted[0], str(log)))
    assert SECRET not in json.dumps(seen) and seen[str(log)] == "Permission denied", seen
    st = log.lstat()
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o600) and SECRET in log.read_text()
    assert not (tmp_path / "state").exists()  # in a Ray worker the state dir is not touched


def test_without_a_plant_the_ray_folder_log_keeps_its_name(pub, tmp_path):
    res, pid = log_with_planted(pub, tmp_path / "state", str(pub), lambda pid: None)
    assert res["log"] == str(pub / f"raysleuth-agent-{pid}.log")
