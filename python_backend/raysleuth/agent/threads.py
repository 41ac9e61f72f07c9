"""The agent's own threads, as debugpy must see them: neither traced, nor suspended when the
program pauses, nor listed among the program's threads (debugpy's `pydev_do_not_trace` and
`is_pydev_daemon_thread` attributes)."""

from __future__ import annotations

import threading


def hide_from_debugger(thread: threading.Thread) -> threading.Thread:
    setattr(thread, "pydev_do_not_trace", True)  # noqa: B010 - attributes debugpy reads
    setattr(thread, "is_pydev_daemon_thread", True)  # noqa: B010
    return thread
