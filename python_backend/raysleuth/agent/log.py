"""Logging for code that runs inside Ray workers.

Never to stdout or stderr (both are the user's log, streamed to the driver): records go to
`raysleuth-agent-<pid>.log` in the Ray session's log folder, opened on the first record.
"""

from __future__ import annotations

import logging
import os

from raysleuth.paths import ray_log_dir as _log_dir

_configured = False
"""Whether the agent's logger has its file handler yet."""


def agent_logger() -> logging.Logger:
    """The `raysleuth.agent` logger, writing to a file and never propagating to Ray's handlers."""
    global _configured
    logger = logging.getLogger("raysleuth.agent")
    if not _configured:
        _configured = True
        logger.propagate = False
        logger.setLevel(os.environ.get("RAYSLEUTH_AGENT_LOG_LEVEL", "INFO").upper())
        try:
            path = os.path.join(_log_dir(), f"raysleuth-agent-{os.getpid()}.log")
            handler = logging.FileHandler(path, delay=True)
            handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
            logger.addHandler(handler)
        except Exception:  # noqa: BLE001
            logger.addHandler(logging.NullHandler())
    return logger
