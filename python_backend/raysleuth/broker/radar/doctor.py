"""`GET /v1/doctor`: the broker's own checks, and each live node's from its relay."""

from __future__ import annotations

import asyncio
import time

from raysleuth.probes.checks import check
from raysleuth.shared import names

DOCTOR_TIMEOUT_S = 30.0
"""How long the doctor waits for a node's relay (a first start included)."""

LOOPBACK = ("127.0.0.1", "localhost", "::1")


class Doctor:
    def __init__(self, table, relays, listening) -> None:
        self.table = table
        self.relays = relays
        self._listening = listening
        """Callable → (host, http_url, dap_address) the broker serves on."""

    async def node_report(self, node: dict) -> dict:
        try:
            relay = await asyncio.wait_for(self.relays.relay_for(node["node_id"]), DOCTOR_TIMEOUT_S)
            checks = await asyncio.wait_for(relay.doctor.remote(time.time()), DOCTOR_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - one node that cannot answer is a finding
            checks = [
                check(
                    "relay",
                    "fail",
                    f"the node did not answer: {type(exc).__name__}: {exc}",
                    "Check the node with `ray status`; Ray Sleuth reaches every node through its relay.",
                )
            ]
        return {"node_id": node["node_id"], "node_ip": node.get("node_ip"), "checks": checks}

    def broker_checks(self, nodes: list[dict]) -> list[dict]:
        host, http_url, dap = self._listening()
        live = [w for w in self.table.workers() if w.live and w.actor_class not in names.OWN_ACTOR_CLASSES]
        bare = [w for w in live if not w.agent]
        return [
            check("nodes", "ok" if nodes else "fail", f"{len(nodes)} alive node(s) in Ray's State API"),
            check(
                "workers",
                "ok" if not bare else "warn",
                f"{len(live)} live worker(s), {len(bare)} without the agent",
                None
                if not bare
                else "Those workers cannot be attached to or armed: start Ray with RAYSLEUTH=1.",
            ),
            check(
                "listen",
                "ok" if host in LOOPBACK else "info",
                f"HTTP {http_url}, DAP {dap}, token required on both",
            ),
        ]

    async def report(self) -> dict:
        nodes = self.table.alive_nodes()
        reports = await asyncio.gather(*(self.node_report(n) for n in nodes))
        broker = self.broker_checks(nodes)
        fails = [c for c in broker + [c for r in reports for c in r["checks"]] if c["status"] == "fail"]
        return {"ok": not fails, "broker": broker, "nodes": list(reports)}
