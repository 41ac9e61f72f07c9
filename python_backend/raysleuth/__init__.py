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
    from raysleuth.shared.versions import unsupported_message

    refused = unsupported_message()
    if refused:
        import warnings

        message, hint = refused
        warnings.warn(f"Ray Sleuth is off in this process: {message} {hint}", RuntimeWarning, stacklevel=2)
        return
    from raysleuth import agent

    if agent.start_when_connected(source="api") is not None:
        from raysleuth.agent import taskgate
        from raysleuth.agent.identity import ray_connected, ray_worker

        if ray_connected() and getattr(ray_worker(), "mode", None) == 1:  # WORKER_MODE: in a task
            taskgate.mark_if_in_task()


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


_inspect_calls: dict[str, int] = {}
"""Per name: how many times this process called `inspect` (the step when none is given)."""


def inspect(name: str, value, step: int | None = None) -> None:
    """Summarize `value` (a torch tensor or numpy array on any device, a number, or a dict or
    list of them: `model.parameters()`, `state_dict()`, an optimizer) under `name`, for the
    cross-rank table (`GET /v1/inspect`, `raysleuth inspect NAME`).

    The statistics (shape, dtype, mean, std, min, max, L2 norm, NaN/Inf counts, a content hash)
    are computed now, on this thread, by the value's own library on its own device: a few
    passes over the data (see raysleuth/model/tensors.py); only the numbers go to the broker,
    with this worker's rank, in the next heartbeat's batch. `step` defaults to the number of
    earlier calls with this name in this process, so the n-th call of every rank lines up.
    Without the agent (outside Ray) it does nothing, not even the summary; it never raises.
    """
    try:
        from raysleuth import agent

        a = agent.get_agent()
        if a is None or a.disabled:
            return
        from raysleuth.agent.rank import resolve_rank
        from raysleuth.model.tensors import summarize

        name = str(name)
        calls = _inspect_calls.get(name, 0)
        _inspect_calls[name] = calls + 1
        if step is None:
            step = calls
        elif not isinstance(step, (int, float, str)):  # a numpy or torch scalar: a number on the wire
            try:
                step = int(step)
            except (TypeError, ValueError):
                step = str(step)
        rows = summarize(name, value)
        t = time.time()
        fields = {"name": name, "step": step, "rank": resolve_rank().rank}
        a.record_event(
            {"t": t, "name": "inspect", "fields": dict(fields, rows=rows)},
            keep={"t": t, "name": "inspect", "fields": dict(fields, entries=len(rows))},
        )
    except Exception:  # noqa: BLE001 - never raise into the user's program
        _swallow("inspect(%r)", name)


def _swallow(what: str, *args) -> None:
    """Log an error of the API to the agent's log file (never to the program's output)."""
    try:
        from raysleuth.agent.log import swallow

        swallow(what, *args)
    except Exception:  # noqa: BLE001 - the log itself failed: nothing left to tell
        return
