"""The broker's side of the registry actor: the one mailbox between the broker and every agent.

Starts (and restarts) the actor, long-polls it for reports and emitted items, sends commands to
agents and hands them the point set. The only module of the broker that calls the actor.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, cast

from raysleuth.shared import names
from raysleuth.shared.errors import SleuthError
from raysleuth.shared.swallow import swallow_exception

log = logging.getLogger(__name__)


class Agents:
    """Every agent, reached through the registry actor. `str()`: `Agents[registry]`."""

    def __init__(self, hold_s: float) -> None:
        self.registry: Any = None
        """The registry actor's handle (untyped, as Ray's handles are), once started."""
        self.hold_s = hold_s
        """Post-mortem hold, in seconds, while a client watches."""
        self.points_version: str | None = None
        """The registry's version of the point set last handed over (agents report theirs)."""

    def __str__(self) -> str:
        return "Agents[registry]"

    async def start(self) -> None:
        """Start the registry actor on this node (refused when another broker owns one)."""
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        from raysleuth.broker.workers.registry_actor import SleuthRegistry

        if self.registry is None:
            await asyncio.to_thread(_refuse_second_broker)
        node_id = ray.get_runtime_context().get_node_id()
        self.registry = (
            cast(Any, SleuthRegistry)
            .options(
                name=names.REGISTRY_ACTOR,
                namespace=names.NAMESPACE,
                get_if_exists=True,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
                runtime_env={"env_vars": {"RAYSLEUTH": "0"}},
            )
            .remote()
        )
        await asyncio.wait_for(self.registry.ping.remote(), 60)

    async def changes(self, version: int, wait: float) -> dict:
        """{version, reports}: the agents' latest reports, once they differ from `version`."""
        return await self.registry.changes.remote(version, wait)

    async def emitted(self, seq: int, wait: float) -> dict:
        """{seq, items, lost}: logpoint lines, snapshot rows, events and crashes after `seq`."""
        return await self.registry.emitted.remote(seq, wait)

    async def command(self, worker_id: str, command: dict, timeout: float) -> dict:
        """Run one command in a worker's agent thread; its answer (a dict with "ok")."""
        if self.registry is None:
            raise SleuthError("The broker is not connected to its registry yet.", "Try again in a moment.")
        return await self.registry.command.remote(worker_id, command, timeout)

    async def forget(self, worker_ids: list[str]) -> int:
        """The registry drops what it keeps for these workers (gone for good)."""
        if self.registry is None or not worker_ids:
            return 0
        return await self.registry.forget.remote(worker_ids)

    async def set_points(self, specs: list[dict]) -> None:
        """The cluster's point set: agents get it with their next heartbeat, new workers from KV."""
        if self.registry is None:
            return
        version = await self.registry.set_points.remote(specs)
        self.points_version = version
        await asyncio.to_thread(kv_put_points, {"version": version, "points": specs})

    async def set_watch(self, watched: bool) -> None:
        """Crashed workers are held for an attach only while someone watches the stream."""
        if self.registry is None:
            return
        try:
            await self.registry.set_watch.remote(watched, self.hold_s)
        except Exception:  # noqa: BLE001 - a restarting registry gets the flag again
            swallow_exception(log, "telling the registry who watches")

    def stop(self) -> None:
        """At broker stop (blocking): no points for workers that start now, the actor ended."""
        import ray

        kv_put_points(None)
        if self.registry is not None:
            try:
                ray.kill(self.registry)
            except Exception:  # noqa: BLE001 - Ray may be going down already
                swallow_exception(log, "ending the registry actor", level=logging.INFO)


def kv_put_points(data: dict | None) -> None:
    """Leave the point set in Ray's internal KV for workers whose agent has not synced yet."""
    from ray.experimental import internal_kv

    try:
        if data is None:
            internal_kv._internal_kv_del(names.POINTS_KV_KEY, namespace=names.NAMESPACE)
        else:
            internal_kv._internal_kv_put(
                names.POINTS_KV_KEY, json.dumps(data), overwrite=True, namespace=names.NAMESPACE
            )
    except Exception:  # noqa: BLE001 - the registry still delivers the set
        swallow_exception(log, "writing the point set to Ray's KV")


def _refuse_second_broker() -> None:
    """One broker per cluster: a live registry actor means another broker owns it."""
    import ray

    try:
        existing = ray.get_actor(names.REGISTRY_ACTOR, namespace=names.NAMESPACE)
        ray.get(existing.ping.remote(), timeout=5)
    except Exception:  # noqa: BLE001 - none, or a dead one: ours to start
        return
    raise SleuthError(
        "Another Ray Sleuth broker already runs for this Ray cluster.",
        "Use that one (its broker.json is in its state dir on the head node), or stop it first.",
    )
