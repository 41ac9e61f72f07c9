"""Ray Sleuth: debug a Ray cluster as easily as one process.

The API a program uses. Outside Ray, or with no broker running, every call does nothing and
never raises.
"""

from __future__ import annotations

import time

__version__ = "0.1.0"

__all__ = ["init", "set_rank", "event", "inspect", "__version__"]


def init() -> None:
    """Start the Ray Sleuth agent in this process (a driver or a worker); safe to call twice.

    On a Python or Ray outside the tested matrix it starts nothing and warns (RuntimeWarning)
    naming what to install.
    """
    from raysleuth.versions import unsupported_message

    refused = unsupported_message()
    if refused:
        import warnings

        message, hint = refused
        warnings.warn(f"Ray Sleuth is off in this process: {message} {hint}", RuntimeWarning, stacklevel=2)
        return
    from raysleuth import agent

    agent.start_when_connected(source="api")


def set_rank(rank: int, world_size: int | None = None, local_rank: int | None = None) -> None:
    """Tell Ray Sleuth this worker's rank; it wins over RANK/LOCAL_RANK and Ray Train."""
    try:
        from raysleuth import agent
        from raysleuth.agent import rank as rank_mod

        rank_mod.set_explicit(rank, world_size, local_rank)
        a = agent.get_agent()
        if a is not None:
            a.poke()
    except Exception:  # noqa: BLE001 - never raise into the user's program
        _swallow("set_rank(%r)", rank)


def event(name: str, **fields) -> None:
    """Record a named event with fields: kept in this worker's recent-events ring (crash records
    carry it) and sent, in batches with the heartbeat, to the broker's cluster-wide timeline
    (`GET /v1/events`, `raysleuth events --export trace.json`). Never waits, never raises."""
    try:
        from raysleuth import agent

        a = agent.get_agent()
        if a is not None:
            a.record_event({"t": time.time(), "name": str(name), "fields": fields})
    except Exception:  # noqa: BLE001 - never raise into the user's program
        _swallow("event(%r)", name)


def inspect(name: str, value, step: int | None = None) -> None:
    """Record a summary of `value` under `name` for cross-rank comparison (a later release
    sends it to the broker; today it is kept in the worker's recent-events ring)."""
    event("inspect", tensor=str(name), step=step, type=type(value).__name__)


def _swallow(what: str, *args) -> None:
    """Log an error of the API to the agent's log file (never to the program's output)."""
    try:
        from raysleuth.agent.log import swallow

        swallow(what, *args)
    except Exception:  # noqa: BLE001 - the log itself failed: nothing left to tell
        return
