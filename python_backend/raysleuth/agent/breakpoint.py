"""`breakpoint()` in a worker with the agent: Ray's own debugpy path, but on our loopback listener.

Ray points PYTHONBREAKPOINT at `ray.util.rpdb.set_trace`, which listens on the node's address.
The agent points it here instead: open (or reuse) the 127.0.0.1 listener, tell Ray its port,
note where the worker paused for the worker table, then hand over to Ray's `set_trace`, which
reuses that port and waits for a client (the broker, through the node relay).
"""

from __future__ import annotations

import os
import sys

from raysleuth.agent import debugger, stops
from raysleuth.agent.log import swallow, swallowed

RAY_HOOK = "ray.util.rpdb.set_trace"
OUR_HOOK = "raysleuth.agent.breakpoint.set_trace"


def install() -> None:
    """Route breakpoint() here, only where Ray's debugpy path (RAY_DEBUG=1, the default) is on."""
    if os.environ.get("PYTHONBREAKPOINT") == RAY_HOOK and os.environ.get("RAY_DEBUG", "1") == "1":
        os.environ["PYTHONBREAKPOINT"] = OUR_HOOK


def _poke() -> None:
    from raysleuth import agent

    with swallowed("telling the broker about a breakpoint() pause"):
        a = agent.get_agent()
        if a is not None:
            a.poke()


def set_trace(breakpoint_uuid=None):
    import ray.util.debugpy as ray_debugpy

    caller = sys._getframe(1)
    try:
        debugger.open_listener()
        stops.set_paused(
            {"path": caller.f_code.co_filename, "line": caller.f_lineno, "reason": "breakpoint"}, caller
        )
        _poke()
    except Exception:  # noqa: BLE001 - Ray's own path still works without us
        swallow("opening our listener for breakpoint()")
        stops.set_paused(None)
    try:
        # Same call depth as Ray's rpdb.set_trace: Ray stops at this frame's caller's caller.
        return ray_debugpy.set_trace(breakpoint_uuid)
    finally:
        stops.set_paused(None)
        _poke()
