"""`GET /v1/doctor`: the broker's own checks, and each live node's from its relay."""

from __future__ import annotations

import asyncio
import time

from raysleuth.probes.checks import check
from raysleuth.shared import names, raytoken

DOCTOR_TIMEOUT_S = 30.0
"""How long the doctor waits for a node's relay (a first start included)."""

LOOPBACK = ("127.0.0.1", "localhost", "::1")

SOURCES = {
    "env": "RAYSLEUTH=1 and raysleuth.pth",
    "setup_hook": "the runtime_env setup hook",
    "api": "raysleuth.init()",
}
"""How a worker's agent started (its reports' `agent_source`), in words."""

BARE_HINT = (
    "start Ray with RAYSLEUTH=1 in its environment (with raysleuth installed in the workers' Python), "
    'or pass runtime_env={"worker_process_setup_hook": "raysleuth.agent.setup"} to ray.init.'
)


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
        checks = [self.with_workers(c, node["node_id"]) if c.get("check") == "agent" else c for c in checks]
        return {"node_id": node["node_id"], "node_ip": node.get("node_ip"), "checks": checks}

    def agent_counts(self, node_id: str | None = None) -> tuple[int, int, dict[str, int]]:
        """(live workers, those whose agent reports, {how the agent started: count}), on one
        node or on all: what the workers actually run, from their own reports."""
        live = [
            w
            for w in self.table.workers()
            if w.live
            and w.actor_class not in names.OWN_ACTOR_CLASSES
            and (node_id is None or w.node_id == node_id)
        ]
        sources = {r.get("id"): r.get("agent_source") for r in getattr(self.table, "reports", [])}
        how: dict[str, int] = {}
        for w in live:
            if w.agent:
                key = SOURCES.get(sources.get(w.id) or "", "its agent")
                how[key] = how.get(key, 0) + 1
        return len(live), sum(how.values()), how

    def with_workers(self, agent_check: dict, node_id: str) -> dict:
        """The node's `agent` check (what its interpreter has installed) with what its workers run,
        from their own reports: a node whose workers run the agent is no failure, whatever its
        files say (a hook the check does not know, a runtime_env setup hook). Workers without
        the agent are the broker's `workers` check."""
        total, running, how = self.agent_counts(node_id)
        if not total:
            return dict(agent_check, detail=f"{agent_check['detail']}; no workers on this node yet")
        ways = ", ".join(f"{n} through {k}" for k, n in sorted(how.items()))
        seen = f"{running} of {total} workers here run the agent" + (f" ({ways})" if ways else "")
        out = dict(agent_check, detail=f"{agent_check['detail']}; {seen}")
        if agent_check["status"] == "fail" and running:
            out["status"] = "ok" if running == total else "warn"
        return out

    def broker_checks(self, nodes: list[dict]) -> list[dict]:
        host, http_url, dap = self._listening()
        total, running, how = self.agent_counts()
        ways = ", ".join(f"{n} through {k}" for k, n in sorted(how.items()))
        return [
            check("nodes", "ok" if nodes else "fail", f"{len(nodes)} alive node(s) in Ray's State API"),
            check(
                "workers",
                "ok" if running == total else "warn",
                f"{running} of {total} workers run the agent" + (f" ({ways})" if ways else ""),
                None if running == total else "Those without it cannot be attached to or armed: " + BARE_HINT,
            ),
            check(
                "listen",
                "ok" if host in LOOPBACK else "info",
                f"HTTP {http_url}, DAP {dap}, token required on both",
            ),
        ] + self.auth_checks()

    @staticmethod
    def auth_checks() -> list[dict]:
        """Where the broker's Ray token comes from, while the cluster uses Ray's token auth."""
        if raytoken.auth_mode() != "token":
            return []
        status, detail, hint = raytoken.describe()
        return [check("ray auth", status, detail, hint)]

    async def report(self) -> dict:
        nodes = self.table.alive_nodes()
        reports = await asyncio.gather(*(self.node_report(n) for n in nodes))
        broker = self.broker_checks(nodes)
        fails = [c for c in broker + [c for r in reports for c in r["checks"]] if c["status"] == "fail"]
        return {"ok": not fails, "broker": broker, "nodes": list(reports)}
