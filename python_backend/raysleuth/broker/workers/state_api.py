"""Client of Ray's State API (the dashboard's /api/v0 endpoints), for display data only.

Sends Ray's auth token when the cluster uses token auth. Failures are reported, never raised
into the broker's loops: the broker then works from agent reports alone.
"""

from __future__ import annotations

import asyncio
import logging
import time

import aiohttp

from raysleuth.broker.workers.snapshot import StateSnapshot, settle_dead_nodes
from raysleuth.shared import raytoken

log = logging.getLogger(__name__)

LIMIT = 10_000
"""Row limit per list call (Ray's own cap)."""


def ray_auth_headers() -> dict[str, str]:
    """`Authorization: Bearer` for Ray's dashboard when the cluster uses token auth, else {}:
    the token Ray's own client finds (`raysleuth.shared.raytoken`), once `connect_ray` has set
    RAY_AUTH_MODE to match the cluster."""
    return raytoken.http_headers()


class StateApiClient:
    def __init__(self, dashboard_url: str | None) -> None:
        if dashboard_url and not dashboard_url.startswith("http"):
            dashboard_url = "http://" + dashboard_url
        self.url = dashboard_url.rstrip("/") if dashboard_url else None
        self.headers = ray_auth_headers()
        self.last_error: str | None = None if self.url else "the cluster has no dashboard"
        self.down_since: float | None = None if self.url else time.time()
        """When the current outage began (the first failed snapshot), or None while it answers."""
        self._session: aiohttp.ClientSession | None = None

    def __str__(self) -> str:
        return f"StateApi[{self.url}]"

    async def _get(self, path: str) -> list[dict]:
        assert self._session is not None and self.url is not None
        async with self._session.get(self.url + path, headers=self.headers) as resp:
            if resp.status in (401, 403):
                sent = "no token" if not self.headers else "Ray's token"
                raise PermissionError(
                    f"Ray's dashboard refused our request ({resp.status}, {sent} sent): the cluster "
                    "uses token auth; give the broker the cluster's token (RAY_AUTH_TOKEN, "
                    "RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token) and start it again"
                )
            resp.raise_for_status()
            body = await resp.json()
        if not body.get("result", True):
            raise RuntimeError(body.get("msg") or "State API error")
        return body["data"]["result"]["result"]

    async def snapshot(self) -> StateSnapshot | None:
        """One snapshot of workers, actors, running tasks and nodes; None when unreachable."""
        if self.url is None:
            return None
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10))
        try:
            workers, actors, tasks, nodes = await asyncio.gather(
                self._get(f"/api/v0/workers?detail=1&limit={LIMIT}"),
                self._get(f"/api/v0/actors?detail=1&limit={LIMIT}"),
                self._get(
                    f"/api/v0/tasks?detail=1&limit={LIMIT}&filter_keys=state"
                    "&filter_predicates=%3D&filter_values=RUNNING"
                ),
                self._get(f"/api/v0/nodes?detail=1&limit={LIMIT}"),
            )
        except Exception as exc:  # noqa: BLE001
            msg = str(exc) or type(exc).__name__
            if msg != self.last_error:
                log.warning("%s unreachable: %s", self, msg)
            self.last_error = msg
            if self.down_since is None:
                self.down_since = time.time()
            return None
        if self.down_since is not None:
            log.warning("%s answers again after %.0f s", self, time.time() - self.down_since)
        self.last_error = None
        self.down_since = None
        return settle_dead_nodes(StateSnapshot(workers, actors, tasks, nodes, time.time()))

    def degraded(self) -> dict | None:
        """What `GET /v1/status` says while the State API is down (None while it answers)."""
        if self.last_error is None:
            return None
        if self.url is None:
            hint = (
                "Start the head with the dashboard (`ray start --head --include-dashboard=true`): "
                "without it only workers with the agent are listed."
            )
        else:
            hint = (
                f"Ray's dashboard at {self.url} does not answer. Until it does, the broker lists "
                "what the agents report (workers without the agent and task names are missing, "
                "deaths are recorded once it is back) and catches up by itself. Look at the "
                "head's dashboard.log (in the Ray session's logs folder), or run `ray status`."
            )
        return {"part": "state_api", "error": self.last_error, "since": self.down_since, "hint": hint}

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
