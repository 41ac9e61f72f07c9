"""Node relays: one Ray actor per node that carries DAP bytes to debugpy on 127.0.0.1 there.

Started once per alive node (on the first State API snapshot that shows it, or on demand), and
owned here: a relay start still running when the broker stops is cancelled and awaited.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, cast

from raysleuth.shared import names
from raysleuth.shared.errors import SleuthError

log = logging.getLogger(__name__)

START_TIMEOUT_S = 60.0


class RelayPool:
    def __init__(self, start=None) -> None:
        self._start_one = start or start_relay
        """`async start(node_id) -> relay handle`: Ray's actor start (a seam for tests)."""
        self.relays: dict[str, object] = {}
        """Node id → that node's NodeRelay actor handle."""
        self._starting: dict[str, asyncio.Task] = {}
        self._closed = False
        self._local_node_id: str | None = None

    @property
    def local_node_id(self) -> str | None:
        """The node the broker runs on: its workers' debugpy is reached on loopback directly."""
        if self._local_node_id is None:
            try:
                import ray

                self._local_node_id = ray.get_runtime_context().get_node_id() or ""
            except Exception:  # noqa: BLE001 - not connected (yet): every link goes by relay
                return None
        return self._local_node_id or None

    def __str__(self) -> str:
        return f"RelayPool[{len(self.relays)} nodes]"

    def ensure(self, nodes: list[dict]) -> None:
        """Start a relay on every alive node that has none (in the background)."""
        for n in nodes:
            if n.get("state") == "ALIVE" and n["node_id"] not in self.relays:
                self._start_soon(n["node_id"])

    def _start_soon(self, node_id: str) -> asyncio.Task | None:
        if self._closed:
            return None
        task = self._starting.get(node_id)
        if task is None:
            task = self._starting[node_id] = asyncio.ensure_future(self._start(node_id))
            task.add_done_callback(_retrieve)
        return task

    async def _start(self, node_id: str):
        try:
            relay = await self._start_one(node_id)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - said to whoever waits for this relay
            raise SleuthError(
                f"Could not start the node relay on node {node_id[:8]}: {exc}",
                "Check that the node is alive (`ray status`).",
            ) from exc
        finally:
            self._starting.pop(node_id, None)
        self.relays[node_id] = relay
        log.info("relay ready on node %s", node_id[:8])
        return relay

    async def relay_for(self, node_id: str | None):
        """The node's relay, started if need be."""
        if not node_id:
            raise SleuthError("The worker's node is unknown.", "Wait a moment and attach again.")
        if node_id in self.relays:
            return self.relays[node_id]
        task = self._start_soon(node_id)
        if task is None:
            raise SleuthError("The broker is stopping.", "Start it again.")
        return await asyncio.shield(task)

    async def close(self) -> None:
        """Cancel relay starts still running and wait for them (the broker stops)."""
        self._closed = True
        tasks = list(self._starting.values())
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def start_relay(node_id: str):
    """Start (or find) the node's relay actor, pinned to that node, and wait until it answers."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from raysleuth.broker.debug.relay_actor import NodeRelay

    relay = (
        cast(Any, NodeRelay)
        .options(
            name=f"raysleuth-relay-{node_id[:16]}",
            namespace=names.NAMESPACE,
            get_if_exists=True,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
            runtime_env={"env_vars": {"RAYSLEUTH": "0"}},
        )
        .remote()
    )
    await asyncio.wait_for(relay.ping.remote(), START_TIMEOUT_S)
    return relay


def _retrieve(task: asyncio.Task) -> None:
    """A failed start is reported to the caller that waits for it; none may be: mark it seen."""
    if not task.cancelled() and task.exception() is not None:
        log.info("relay start failed: %s", task.exception())
