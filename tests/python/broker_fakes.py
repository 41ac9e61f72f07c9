"""Fakes at the broker's seams for its services' unit tests: the registry (agents), the node
relays and their Ray actor handles. No Ray, no processes."""

from __future__ import annotations

import asyncio

from raysleuth.model.worker import Worker


class Remote:
    """A Ray actor method: `.remote(...)` gives an awaitable, like an ObjectRef."""

    def __init__(self, fn):
        self.fn = fn

    def remote(self, *args, **kwargs):
        async def call():
            res = self.fn(*args, **kwargs)
            return await res if asyncio.iscoroutine(res) else res

        return call()


class FakeAgents:
    """The registry seam: records point sets, answers commands from a table or a function."""

    def __init__(self, answers=None):
        self.point_sets: list[list[dict]] = []
        self.commands: list[tuple[str, dict]] = []
        self.watch: list[bool] = []
        self.answers = answers or {}

    async def set_points(self, specs):
        self.point_sets.append(specs)
        self.points_version = f"v{len(self.point_sets)}"

    async def set_watch(self, watched):
        self.watch.append(watched)

    async def command(self, worker_id, command, timeout):
        self.commands.append((worker_id, command))
        ans = self.answers.get(command["op"], {"ok": True})
        if isinstance(ans, Exception):
            raise ans
        res = ans(worker_id, command) if callable(ans) else ans
        return await res if asyncio.iscoroutine(res) else res


class FakeRelay:
    def __init__(self, fault_text=None, pyspy=None, fatal_check=None):
        self.fault_text = Remote(lambda path: fault_text)
        self.fatal_check = Remote(lambda wid, pid: (fatal_check or {}).get(wid))
        self.pyspy_dump = Remote(
            pyspy or (lambda pid, native, timeout: {"threads": [], "error": "no py-spy"})
        )
        self.doctor = Remote(lambda t: [{"check": "python", "status": "ok", "detail": "3.11", "hint": None}])


class FakeRelays:
    def __init__(self, relay=None, fail: Exception | None = None):
        self.relay = relay or FakeRelay()
        self.fail = fail
        self.asked: list[str] = []

    async def relay_for(self, node_id):
        self.asked.append(node_id)
        if self.fail:
            raise self.fail
        return self.relay


def worker(wid, rank=None, state="running", agent=True, **kw) -> Worker:
    base = dict(pid=100 + len(wid), node_id="node1", node_ip="127.0.0.1", job_id="01000000")
    base.update(actor_class="Trainer", last_seen=1.0)
    base.update(kw)
    return Worker(wid, rank=rank, state=state, agent=agent, **base)


class FakeTable:
    def __init__(self, workers=(), ray_records=None):
        self._workers = list(workers)
        self.reports: list[dict] = []
        self.ray_records = ray_records or {}

    def workers(self):
        return self._workers

    def get(self, wid):
        return next((w for w in self._workers if w.id == wid), None)

    def nodes(self):
        return [{"node_id": "node1", "node_ip": "127.0.0.1", "alive": True, "workers": len(self._workers)}]

    def alive_nodes(self):
        return [{"node_id": "node1", "node_ip": "127.0.0.1", "state": "ALIVE"}]

    def live_ids(self):
        return {w.id for w in self._workers if w.state not in ("exited", "crashed")}

    def ray_debugger_port(self, wid):
        return None

    def resumed(self, wid):
        """The broker let `wid` run (the real table then reads its paused report as running)."""
        self.get(wid).state = "running"

    def ray_record(self, wid):
        return self.ray_records.get(wid)


def services(token: str, table, **given):
    """The HTTP layer's `Services` for a test: the token, a table and what the test passes; the
    services it does not use are None (a route that needs one answers 500, which no test asks)."""
    from raysleuth.broker.events import EventHub
    from raysleuth.broker.http_api import Services

    names = [f for f in Services.__dataclass_fields__ if f not in ("token", "table")]
    base = {name: None for name in names} | {"token_file": "/state/token", "hub": EventHub(), "status": dict}
    return Services(token=token, table=table, **(base | given))
