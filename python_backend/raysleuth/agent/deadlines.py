"""What will kill a worker that stays paused: the timeouts it is subject to, read while it is
paused (the broker turns them into "kills in mm:ss" from the moment the pause began).

- Ray Train's worker health check: the controller's poll of a Train worker hangs while the
  debugger holds every thread; after RAY_TRAIN_WORKER_HEALTH_CHECK_TIMEOUT_S (default 600 s)
  the worker is declared dead. Read from this worker's environment (the controller usually has
  the same: set it in the job's runtime_env).
- torch.distributed: the other ranks wait in a collective for at most the process group's
  timeout, then fail. Read from the default group's backend options when torch.distributed is
  loaded and initialized (never imported here).

Imports nothing that is not loaded already; never raises.
"""

from __future__ import annotations

import os
import sys

TRAIN_ENV = "RAY_TRAIN_WORKER_HEALTH_CHECK_TIMEOUT_S"
TRAIN_DEFAULT_S = 600.0
TRAIN_WORKER_MODULE = "ray.train.v2._internal.execution.worker_group.worker"
"""Imported in the actors Ray Train runs training in."""


def _train(rank_source: str | None) -> dict | None:
    if rank_source != "ray.train" and TRAIN_WORKER_MODULE not in sys.modules:
        return None
    try:
        seconds = float(os.environ.get(TRAIN_ENV, TRAIN_DEFAULT_S))
    except ValueError:
        seconds = TRAIN_DEFAULT_S
    return {
        "what": "Ray Train's worker health check",
        "seconds": seconds,
        "setting": f"{TRAIN_ENV} (runtime_env env_vars)",
    }


def _collective() -> dict | None:
    dist = sys.modules.get("torch.distributed")
    torch = sys.modules.get("torch")
    if dist is None or torch is None or not dist.is_available() or not dist.is_initialized():
        return None
    pg = dist.group.WORLD
    for device in ("cuda", "cpu"):
        try:
            backend = pg._get_backend(torch.device(device))
            seconds = backend.options._timeout.total_seconds()
        except Exception:  # noqa: BLE001 - no backend for that device, or another torch
            continue
        return {
            "what": f"the other ranks' {dist.get_backend()} collectives",
            "seconds": float(seconds),
            "setting": "init_process_group(timeout=...)",
        }
    return None


def paused_deadlines(rank_source: str | None) -> list[dict]:
    """[{what, seconds, setting}]: the timeouts that end a pause of this worker."""
    out = []
    for find in (lambda: _train(rank_source), _collective):
        try:
            found = find()
        except Exception:  # noqa: BLE001 - a deadline we cannot read is one we do not show
            from raysleuth.agent.log import swallow

            swallow("reading a timeout that ends a pause")
            continue
        if found is not None:
            out.append(found)
    return out
