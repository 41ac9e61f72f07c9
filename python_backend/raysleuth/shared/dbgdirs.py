"""Removing the debugger folders of workers that are gone: a worker's debugpy listens on an
AF_UNIX socket in `rs-dbg-<pid>-<random>` (0700, in the temp folder; raysleuth/agent/debugger.py),
removed at exit, but a killed worker (SIGKILL, Ray's own kill, a node shutdown) runs no atexit.
The node's relay sweeps them (raysleuth/broker/debug/relay_actor.py), and so does every worker
that opens its own debugger.

Only plain folders of this user are removed (never a link, never another user's), each opened
without following a link and emptied through its descriptor.
"""

from __future__ import annotations

import os
import stat
import tempfile
import time

from raysleuth.shared.paths import DEBUG_DIR_PREFIX, debug_dir_pid

OLD_DIR_GRACE_S = 60.0
"""An old version's `rs-dbg-XXXXXXXX` folder (no pid in its name) is removed once it is this old
and no socket is bound in it (/proc/net/unix)."""
PID_START_SLACK_S = 2.0
"""A process's start time is known to about a second: a pid whose process started more than this
after the folder last changed is another process (the pid was reused)."""


def sweep_debug_dirs(folder: str | None = None) -> list[str]:
    """Remove the debugger folders in `folder` (the temp folder) whose worker is gone: its pid
    ended, or now belongs to a process that started after the folder last changed. Returns the
    paths removed."""
    folder = folder or tempfile.gettempdir()
    try:
        top = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return []
    removed = []
    try:
        with os.scandir(top) as entries:
            names = [e.name for e in entries if e.name.startswith(DEBUG_DIR_PREFIX)]
        bound: list[str] | None = None
        for name in names:
            try:
                st = os.stat(name, dir_fd=top, follow_symlinks=False)
            except OSError:
                continue
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
                continue
            pid = debug_dir_pid(name)
            if pid is not None:
                if owner_alive(pid, st.st_mtime):
                    continue
            else:  # an old version's folder (no pid): gone once no socket is bound in it
                if time.time() - st.st_mtime < OLD_DIR_GRACE_S:
                    continue
                bound = bound_unix_paths() if bound is None else bound
                inside = os.path.join(folder, name) + os.sep
                if any(p.startswith(inside) or not p for p in bound):
                    continue  # bound there, or /proc does not say: kept
            if _remove_dir(top, name, st):
                removed.append(os.path.join(folder, name))
    finally:
        os.close(top)
    return removed


def owner_alive(pid: int, changed: float) -> bool:
    """Whether process `pid` may still be the one that made a folder last changed at `changed`
    (True where unsure: the folder is kept)."""
    started = process_start_time(pid)
    if started is None:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except OSError:  # another user's process: it lives
            return True
        return True
    return started <= changed + PID_START_SLACK_S


def process_start_time(pid: int) -> float | None:
    """When process `pid` started (seconds since the epoch, to about a second), from /proc; None
    where /proc does not say (then only whether it lives is known)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
        with open("/proc/stat", "rb") as f:
            btime = next(int(line.split()[1]) for line in f if line.startswith(b"btime "))
    except (OSError, StopIteration, ValueError):
        return None
    fields = data[data.rindex(b")") + 2 :].split()  # after "pid (comm) ": state is fields[0]
    return btime + int(fields[19]) / os.sysconf("SC_CLK_TCK")  # starttime: field 22 of stat


def bound_unix_paths() -> list[str]:
    """The paths of the AF_UNIX sockets bound on this host (there may be none); `[""]` where
    /proc does not say, which matches every folder."""
    try:
        with open("/proc/net/unix", encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()[1:]
    except OSError:
        return [""]
    return [parts[7] for parts in (line.split(None, 7) for line in lines) if len(parts) == 8]


def _remove_dir(top: int, name: str, st: os.stat_result) -> bool:
    """Empty and remove folder `name` of `top`, if it still is the one found (`st`)."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, dir_fd=top)
    except OSError:
        return False
    try:
        now = os.fstat(fd)
        if (now.st_ino, now.st_dev, now.st_uid) != (st.st_ino, st.st_dev, st.st_uid):
            return False
        with os.scandir(fd) as entries:
            inside = [e.name for e in entries]
        for child in inside:
            try:
                os.unlink(child, dir_fd=fd)  # the socket; a folder inside stays (rmdir fails)
            except OSError:
                pass
    finally:
        os.close(fd)
    try:
        os.rmdir(name, dir_fd=top)
    except OSError:
        return False
    return True
