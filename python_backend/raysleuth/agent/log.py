"""Logging for code that runs inside Ray workers, and the one way the agent ignores an error.

Never to stdout or stderr (both are the user's log, streamed to the driver): records go to
`raysleuth-agent-<pid>.log` in the Ray session's log folder, opened on the first record. Outside
a Ray worker they go to the state dir's `agent-logs` folder (0700, ours; else
`$XDG_RUNTIME_DIR/raysleuth`), never to a fixed name in /tmp. Each log is a new file, created
O_CREAT|O_EXCL|O_NOFOLLOW 0600: Ray's log folder is 0777, so a file or link another user put at
the name first is never opened (the log takes a random name instead). The logger is configured
on first use only (at start-up Ray is not imported yet).
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import stat

from raysleuth.shared.swallow import swallow_exception

_configured = False
"""Whether the agent's logger has its file handler yet."""

MAX_PRIVATE_LOGS = 64
"""Logs kept in the private folder (processes outside Ray): older ones go when a new one starts."""


def agent_logger() -> logging.Logger:
    """The `raysleuth.agent` logger, writing to a file and never propagating to Ray's handlers."""
    global _configured
    logger = logging.getLogger("raysleuth.agent")
    if not _configured:
        _configured = True
        logger.propagate = False
        logger.setLevel(os.environ.get("RAYSLEUTH_AGENT_LOG_LEVEL", "INFO").upper())
        try:
            _, fd = new_log_file("agent")
            stream = os.fdopen(fd, "a", encoding="utf-8", errors="backslashreplace")
            handler: logging.Handler = logging.StreamHandler(stream)
            handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
            logger.addHandler(handler)
        except Exception:  # noqa: BLE001 - no log folder: the agent runs on without a log
            logger.addHandler(logging.NullHandler())
    return logger


def new_log_file(kind: str) -> tuple[str, int]:
    """A new log file of this process, `raysleuth-<kind>-<pid>[-<random>].log`: its path and a
    descriptor open for appending. In Ray's session log folder, else in `private_log_dir()`;
    created exclusively, so nothing someone else made is ever written (OSError if no folder)."""
    from raysleuth.shared.paths import ray_log_dir  # asks Ray: only once there is a record
    from raysleuth.shared.privfiles import create_exclusive

    folder = ray_log_dir() or private_log_dir()
    base = f"raysleuth-{kind}-{os.getpid()}"
    for name in (f"{base}.log", f"{base}-{secrets.token_hex(8)}.log"):
        path = os.path.join(folder, name)
        try:
            return path, create_exclusive(path)
        except FileExistsError:
            continue  # planted (or a reused pid's): a random name, which nobody can guess
    raise FileExistsError(f"no new log file in {folder}")


def private_log_dir() -> str:
    """This user's folder for the logs of a process outside Ray (0700, ours, no link on the
    way): the state dir's `agent-logs`, else `$XDG_RUNTIME_DIR/raysleuth`. Old logs beyond
    MAX_PRIVATE_LOGS are removed."""
    from raysleuth.shared.errors import SleuthError
    from raysleuth.shared.paths import AGENT_LOGS, default_state_dir
    from raysleuth.shared.privfiles import check_state_dir, private_dir

    try:
        sd = default_state_dir()
        check_state_dir(sd)
        folder = str(private_dir(sd / AGENT_LOGS))
    except (SleuthError, OSError):
        runtime = os.environ.get("XDG_RUNTIME_DIR", "")
        st = os.lstat(runtime) if os.path.isabs(runtime) else None
        if st is None or not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise OSError("no private folder for the agent's log") from None
        folder = str(private_dir(os.path.join(runtime, "raysleuth")))
    _prune(folder)
    return folder


def _prune(folder: str) -> None:
    """Remove the oldest of our plain `raysleuth-*.log` files beyond MAX_PRIVATE_LOGS."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        logs = []
        with os.scandir(fd) as entries:
            for e in entries:
                if e.name.startswith("raysleuth-") and e.name.endswith(".log"):
                    st = e.stat(follow_symlinks=False)
                    if stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid():
                        logs.append((st.st_mtime, e.name))
        for _, name in sorted(logs)[: max(0, len(logs) - MAX_PRIVATE_LOGS + 1)]:
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=fd)
    finally:
        os.close(fd)


def swallow(what: str, *args, level: int = logging.WARNING) -> None:
    """In an `except` block whose error must not reach the task: `swallow_exception` with the
    agent's logger (configured only now, when there is something to say)."""
    swallow_exception(agent_logger(), what, *args, level=level)


@contextlib.contextmanager
def swallowed(what: str, *args, level: int = logging.WARNING):
    """`with swallowed("closing %s", x): ...` — the block's Exception goes to the agent's log."""
    try:
        yield
    except Exception:  # noqa: BLE001 - the point of this helper
        swallow(what, *args, level=level)
