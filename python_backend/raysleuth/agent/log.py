"""Logging for code that runs inside Ray workers, and the one way the agent ignores an error.

Never to stdout or stderr (both are the user's log, streamed to the driver): records go to
`raysleuth-agent-<pid>.log` in the Ray session's log folder, opened on the first record. The
logger is configured on first use only (at start-up Ray is not imported yet).
"""

from __future__ import annotations

import contextlib
import logging
import os

from raysleuth.shared.swallow import swallow_exception

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
            from raysleuth.shared.paths import ray_log_dir  # asks Ray: only once there is a record

            path = os.path.join(ray_log_dir(), f"raysleuth-agent-{os.getpid()}.log")
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600))
            handler = logging.FileHandler(path, delay=True)
            handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
            logger.addHandler(handler)
        except Exception:  # noqa: BLE001 - no log folder: the agent runs on without a log
            logger.addHandler(logging.NullHandler())
    return logger


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
