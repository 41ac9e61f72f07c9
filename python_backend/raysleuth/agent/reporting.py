"""The worker's report: what the registry learns about it at each heartbeat and each poke.

Built in the agent thread, or in a user thread on a poke (a pause, a new rank): reads state,
imports nothing that is not loaded already (no debugger, no post-mortem).
"""

from __future__ import annotations

import os
import time

from raysleuth.agent import rank as rank_mod
from raysleuth.agent import stops
from raysleuth.agent.deadlines import paused_deadlines
from raysleuth.agent.identity import Identity
from raysleuth.agent.log import swallow


def _gpu_ids() -> list[str]:
    import ray

    try:
        return [str(g) for g in ray.get_runtime_context().get_accelerator_ids().get("GPU", [])]
    except Exception:  # noqa: BLE001 - older Ray, or no context yet: no GPUs listed
        swallow("reading the worker's GPU ids")
        return []


def build_report(identity: Identity, source: str, bp_version: str, trigger) -> dict:
    """{ids, actor, rank, gpu_ids, state, paused_at, armed, trigger, cwd, time, ...}."""
    info = dict(identity.static or {})
    info["job_id"] = identity.job_id()
    info.update(identity.actor())
    info.update(identity.reported_roles())  # verl roles and worker group (issue 38)
    r = rank_mod.resolve_rank()
    info.update(rank=r.rank, local_rank=r.local_rank, world_size=r.world_size, rank_source=r.source)
    info["gpu_ids"] = _gpu_ids()
    info["state"] = "running"
    paused = stops.paused_at()
    if paused is not None:
        info["state"] = "paused"
        info["paused_at"] = paused
        info["deadlines"] = paused_deadlines(r.source)
    c = stops.crashed
    if c is not None:
        info["state"] = "crashed"
        info["paused_at"] = {"path": c["path"], "line": c["line"], "reason": "exception"}
        info["crash"] = c["crash"]
        info["held_until"] = c["held_until"]
    info["agent_source"] = source
    info["bp_version"] = bp_version
    info["armed"] = sorted(trigger.armed) if trigger is not None else []
    if trigger is not None and trigger.backend is not None:
        info["trigger"] = trigger.backend.name
    try:
        info["cwd"] = os.getcwd()  # a runtime_env working_dir is unpacked here: for path mapping
    except OSError:
        info["cwd"] = None
    info["time"] = time.time()
    return info
