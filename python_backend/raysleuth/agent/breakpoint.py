"""`breakpoint()` in a worker with the agent: Ray's own debugpy path, but on our loopback listener.

Ray points PYTHONBREAKPOINT at `ray.util.rpdb.set_trace`, which listens on the node's address.
The agent points it here instead: open (or reuse) the 127.0.0.1 listener, tell Ray its port,
note where the worker paused for the worker table, then hand over to Ray's `set_trace`, which
reuses that port and waits for a client (the broker, through the node relay).
"""

from __future__ import annotations

import os
import sys
import threading

RAY_HOOK = "ray.util.rpdb.set_trace"
OUR_HOOK = "raysleuth.agent.breakpoint.set_trace"

paused_at: dict | None = None
"""{path, line, reason} while this worker waits in breakpoint(), for the worker table."""

paused_thread: int | None = None
"""Ident of the thread that is paused (for evaluate on all paused ranks)."""


def install() -> None:
    """Route breakpoint() here, only where Ray's debugpy path (RAY_DEBUG=1, the default) is on."""
    if os.environ.get("PYTHONBREAKPOINT") == RAY_HOOK and os.environ.get("RAY_DEBUG", "1") == "1":
        os.environ["PYTHONBREAKPOINT"] = OUR_HOOK


def set_trace(breakpoint_uuid=None):
    global paused_at, paused_thread
    import ray.util.debugpy as ray_debugpy

    from raysleuth import agent
    from raysleuth.agent import commands

    caller = sys._getframe(1)
    try:
        commands.open_listener()
        paused_at = {"path": caller.f_code.co_filename, "line": caller.f_lineno, "reason": "breakpoint"}
        paused_thread = threading.get_ident()
        a = agent.get_agent()
        if a is not None:
            a.poke()
    except Exception:  # noqa: BLE001 - Ray's own path still works without us
        paused_at = None
    try:
        # Same call depth as Ray's rpdb.set_trace: Ray stops at this frame's caller's caller.
        return ray_debugpy.set_trace(breakpoint_uuid)
    finally:
        paused_at = None
        paused_thread = None
        a = agent.get_agent()
        if a is not None:
            a.poke()
