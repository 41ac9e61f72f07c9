"""Rank resolution for a worker: `raysleuth.set_rank()` > RANK/LOCAL_RANK/WORLD_SIZE > Ray Train.

Resolved lazily on every heartbeat, because Ray Train sets the env vars and its context after the
worker starts. Never imports Ray Train itself: only asks it when the program already did.
"""

from __future__ import annotations

import os
import sys
from typing import NamedTuple


class RankInfo(NamedTuple):
    # A NamedTuple, not a dataclass: this module loads in every worker's start-up path.
    rank: int | None = None
    """Global rank, or None while unknown."""
    local_rank: int | None = None
    """Rank within the node."""
    world_size: int | None = None
    """Number of ranks in the group."""
    source: str | None = None
    """Where the rank came from: "api", "env" or "ray.train"."""


_explicit: RankInfo | None = None
"""Rank given by `raysleuth.set_rank()` in this process, if any."""

_train_failure_logged = False
"""Whether Ray Train's context raising was logged (once: it is asked on every pass)."""


def set_explicit(rank: int, world_size: int | None = None, local_rank: int | None = None) -> None:
    global _explicit
    _explicit = RankInfo(int(rank), local_rank, world_size, "api")


def _int_or_none(value: object) -> int | None:
    try:
        return int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return None


def from_env(environ) -> RankInfo | None:
    rank = _int_or_none(environ.get("RANK"))
    local_rank = _int_or_none(environ.get("LOCAL_RANK"))
    world_size = _int_or_none(environ.get("WORLD_SIZE"))
    if rank is None and local_rank is None:
        return None
    return RankInfo(rank if rank is not None else local_rank, local_rank, world_size, "env")


def from_ray_train() -> RankInfo | None:
    """Ask Ray Train's context, only when the program has imported Ray Train already."""
    if "ray.train" not in sys.modules:
        return None
    try:
        ctx = sys.modules["ray.train"].get_context()
        rank = ctx.get_world_rank()
        if rank is None:
            return None
        return RankInfo(
            int(rank), _int_or_none(ctx.get_local_rank()), _int_or_none(ctx.get_world_size()), "ray.train"
        )
    except Exception:  # noqa: BLE001 - outside a Train worker the context raises: not known
        global _train_failure_logged
        if not _train_failure_logged:  # once: this runs on every pass of a scoped point
            _train_failure_logged = True
            from raysleuth.agent.log import swallow

            swallow("asking Ray Train's context for the rank", level=10)  # DEBUG: usual outside Train
        return None


def resolve_rank(
    explicit: RankInfo | None = None,
    environ=None,
    train=from_ray_train,
) -> RankInfo:
    """The worker's rank by the contract's order; fields a source lacks stay None."""
    if explicit is None:
        explicit = _explicit
    if explicit is not None:
        return explicit
    env = from_env(os.environ if environ is None else environ)
    if env is not None:
        return env
    return train() or RankInfo()
