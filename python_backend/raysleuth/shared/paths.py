"""Where Ray Sleuth keeps its files on a host: the state dir, the broker file and the token file.

Pure path logic; creating the files is the broker's job.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

BROKER_FILE = "broker.json"
TOKEN_FILE = "token"


def default_state_dir() -> Path:
    """`RAYSLEUTH_STATE_DIR`, else `~/.raysleuth`."""
    env = os.environ.get("RAYSLEUTH_STATE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".raysleuth"


def state_dir(value: str | os.PathLike | None = None) -> Path:
    return Path(value).expanduser().resolve() if value else default_state_dir()


def ray_log_dir() -> str:
    """This process's Ray session log folder (where agent logs go), else the temp folder."""
    try:
        from ray._private import worker

        node = getattr(worker.global_worker, "node", None)
        if node is not None:
            return node.get_logs_dir_path()
    except Exception:  # noqa: BLE001 - not in a Ray process (or an old Ray): the temp folder
        return tempfile.gettempdir()
    return tempfile.gettempdir()
