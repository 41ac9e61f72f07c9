"""Where Ray Sleuth keeps its files on a host: the state dir, the broker file and the token file,
and the names of a worker's debugger folders.

Pure path logic; creating the files is the broker's job (raysleuth/shared/privfiles.py).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

BROKER_FILE = "broker.json"
TOKEN_FILE = "token"
AGENT_LOGS = "agent-logs"
"""The state dir's folder for the logs of agents outside a Ray worker (no Ray session folder)."""

DEBUG_DIR_PREFIX = "rs-dbg-"
"""A worker's debugpy socket folder in the temp folder: `rs-dbg-<pid>-<random>` (0700, made by
mkdtemp), so the node's relay can remove it once that pid is gone."""

_DEBUG_DIR = re.compile(r"rs-dbg-([1-9][0-9]{0,9})-[A-Za-z0-9_]+")


def default_state_dir() -> Path:
    """`RAYSLEUTH_STATE_DIR`, else `~/.raysleuth`."""
    env = os.environ.get("RAYSLEUTH_STATE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".raysleuth"


def state_dir(value: str | os.PathLike | None = None) -> Path:
    """The state dir given (absolute, links left as they are: a link is refused, not followed),
    else the default."""
    return Path(os.path.abspath(Path(value).expanduser())) if value else default_state_dir()


def ray_log_dir() -> str | None:
    """This process's Ray session log folder (where agent logs go), None outside Ray."""
    try:
        from ray._private import worker

        node = getattr(worker.global_worker, "node", None)
        if node is not None:
            return node.get_logs_dir_path()
    except Exception:  # noqa: BLE001 - not in a Ray process (or an old Ray)
        return None
    return None


def debug_dir_prefix(pid: int) -> str:
    """The mkdtemp prefix of the debugger folder of process `pid`."""
    return f"{DEBUG_DIR_PREFIX}{pid}-"


def debug_dir_pid(name: str) -> int | None:
    """The pid a debugger folder's name carries (None for another name or an old `rs-dbg-XXXX`)."""
    m = _DEBUG_DIR.fullmatch(name)
    return int(m.group(1)) if m else None
