"""The worker's debugpy answers without Nagle's delay: TCP_NODELAY on the socket pydevd talks
DAP on (the latency itself is measured by bench/step_latency.py, not here). Its AF_UNIX socket
folder (`rs-dbg-<pid>-<random>`) goes with the worker: at exit, or swept by the node's relay once
the pid is gone (#37)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import psutil
import pytest
from helpers import run_probe

from raysleuth.shared.dbgdirs import process_start_time, sweep_debug_dirs
from raysleuth.shared.paths import debug_dir_pid

PROBE = """
import json, os, socket
os.environ["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
import debugpy, debugpy.server.api
from raysleuth.agent.debugger import tune_debugger_sockets
patched = tune_debugger_sockets() if {patch} else False
again = tune_debugger_sockets() if {patch} else False
host, port = debugpy.listen(("127.0.0.1", 0), in_process_debug_adapter=True)
c = socket.create_connection((host, port))
body = json.dumps({{"seq": 1, "type": "request", "command": "initialize",
                    "arguments": {{"adapterID": "probe"}}}}).encode()
c.sendall(b"Content-Length: %d\\r\\n\\r\\n" % len(body) + body)
buf = b""
while b'"request_seq": 1' not in buf:
    buf += c.recv(65536)
import pydevd
sock = pydevd.get_global_debugger().writer.sock
print(json.dumps({{"patched": patched, "again": again, "answered": b'"success": true' in buf,
                  "nodelay": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)}}))
os._exit(0)
"""


@pytest.mark.parametrize("patch", [True, False], ids=["ours", "debugpy-default"])
def test_the_socket_pydevd_answers_on_has_nagle_off(patch):
    pytest.importorskip("debugpy")
    res = run_probe(PROBE.format(patch=patch), timeout=60)
    assert res["answered"]
    if patch:
        assert (res["patched"], res["again"], res["nodelay"]) == (True, True, 1)
    else:  # the control: what debugpy does by itself
        assert res["nodelay"] == 0


# --- a worker's debugger folder goes with the worker (#37) -------------------------------------


def gone_pid() -> int:
    """The pid of a process that ran and exited (reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def socket_folder(path, bound: bool = False) -> socket.socket | None:
    """A 0700 folder with a `dap.sock` AF_UNIX socket: still listening (`bound`), or left behind
    by a process that is gone."""
    path.mkdir(mode=0o700)
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path / "dap.sock"))
    if bound:
        s.listen()
        return s
    s.close()
    return None


def test_the_relay_sweeps_the_debugger_folders_of_gone_workers_and_nothing_else(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    dead, me = gone_pid(), os.getpid()
    an_hour_ago = psutil.Process(me).create_time() - 3600
    gone, reused = tmp / f"rs-dbg-{dead}-a1b2c3d4", tmp / f"rs-dbg-{me}-e5f6g7h8"
    live = tmp / f"rs-dbg-{me}-i9j0k1l2"
    for p in (gone, reused, live):
        socket_folder(p)
    os.utime(reused, (an_hour_ago, an_hour_ago))  # older than this process: an earlier owner of the pid
    old_stale, old_live = tmp / "rs-dbg-q8x0zz1a", tmp / "rs-dbg-w2e4r6t8"  # an old version's names
    socket_folder(old_stale)
    listener = socket_folder(old_live, bound=True)
    for p in (old_stale, old_live):
        os.utime(p, (an_hour_ago, an_hour_ago))
    # Kept whatever the pid says: a link (to a folder of ours), a plain file, another user's folder.
    ours = tmp_path / "ours"
    ours.mkdir()
    (ours / "dap.sock").write_text("keep")
    (tmp / f"rs-dbg-{dead}-link0000").symlink_to(ours)
    (tmp / f"rs-dbg-{dead}-file0000").write_text("keep")
    kept = [live, old_live, tmp / f"rs-dbg-{dead}-link0000", tmp / f"rs-dbg-{dead}-file0000"]
    if os.geteuid() == 0:
        theirs = tmp / f"rs-dbg-{dead}-nobody00"
        socket_folder(theirs)
        os.chown(theirs, 65534, 65534)
        kept.append(theirs)
    assert listener is not None
    try:
        removed = sweep_debug_dirs(str(tmp))
        assert sweep_debug_dirs(str(tmp)) == []  # nothing more to do
    finally:
        listener.close()
    assert sorted(removed) == sorted(str(p) for p in (gone, reused, old_stale))
    assert sorted(os.listdir(tmp)) == sorted(p.name for p in kept)
    assert (ours / "dap.sock").read_text() == "keep" and os.path.exists(live / "dap.sock")
    # The old version's socket closed (its worker ended): no socket is bound there any more.
    assert sweep_debug_dirs(str(tmp)) == [str(old_live)]


def test_a_process_start_time_is_read_from_proc_as_psutil_reads_it():
    assert abs(process_start_time(os.getpid()) - psutil.Process().create_time()) < 0.05
    assert process_start_time(gone_pid()) is None


def test_the_agents_debugger_folder_carries_its_pid_goes_at_exit_and_sweeps_the_gone():
    pytest.importorskip("debugpy")
    res = run_probe(FOLDER_PROBE.replace("DEAD", str(gone_pid())), timeout=60)
    assert debug_dir_pid(res["name"]) == res["pid"], res
    assert res["mode"] == "0o700" and res["left_after_exit"] is False, res
    assert res["killed_workers_folder_left"] is False, res


FOLDER_PROBE = """
import atexit, json, os, tempfile, threading
killed = os.path.join(tempfile.gettempdir(), "rs-dbg-DEAD-k1ll3d00")  # a killed worker's
os.mkdir(killed, 0o700)
from raysleuth.agent.debugger import listen_locked
path = listen_locked("ab" * 32)
folder = os.path.dirname(path)
out = {"name": os.path.basename(folder), "pid": os.getpid(), "mode": oct(os.stat(folder).st_mode & 0o777)}
for t in threading.enumerate():
    if t.name == "raysleuth-dbg-sweep":
        t.join(10)
out["killed_workers_folder_left"] = os.path.exists(killed)
if os.path.exists(killed):
    os.rmdir(killed)
atexit._run_exitfuncs()  # what a worker's normal exit runs (a killed one leaves it to the relay)
out["left_after_exit"] = os.path.exists(folder)
print(json.dumps(out))
os._exit(0)
"""
