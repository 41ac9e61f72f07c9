"""All-stop per job: when one rank of a job stops, pause its other ranks (issue 13, "ranks as a
group"). Off by default; `PUT /v1/settings {"all_stop": true}` (the extension's toggle) turns it on.

Watches the worker table (hub topic `table`): a worker that is newly paused, and that this
service did not pause itself, makes it pause every other running worker of the same job with an
agent. The group is forgotten once none of its workers is paused any more, so the next stop of
that job pauses the others again.
"""

from __future__ import annotations

import asyncio
import logging

from raysleuth.shared.errors import BadRequest

log = logging.getLogger(__name__)


class AllStop:
    def __init__(self, table, control, hub, tasks=None) -> None:
        self.table = table
        self.control = control
        self.hub = hub
        self._spawn = tasks.spawn if tasks is not None else (lambda coro, _name: asyncio.ensure_future(coro))
        self.on = False
        self._paused: set[str] = set()
        """Workers paused at the last look."""
        self._caused: dict[str, set[str]] = {}
        """Job id → the workers this service asked to pause for that job's stop."""
        self.last: dict | None = None
        """The answer of the last group pause (for the settings view and tests)."""
        hub.on("table", lambda _p: self.look())

    def __str__(self) -> str:
        return f"AllStop[{'on' if self.on else 'off'}]"

    def settings(self) -> dict:
        return {"all_stop": self.on}

    def put_settings(self, body: dict) -> dict:
        value = body.get("all_stop")
        if not isinstance(value, bool):
            raise BadRequest(f"'all_stop' must be true or false, not {value!r}", 'Send {"all_stop": true}.')
        self.on = value
        log.info("all-stop per job %s", "on" if value else "off")
        self.hub.publish("settings", self.settings())
        return self.settings()

    def look(self) -> None:
        workers = self.table.workers()
        paused = {w.id for w in workers if w.state == "paused"}
        new = paused - self._paused
        self._paused = paused
        for job, ids in list(self._caused.items()):
            if not ids & paused and not any(w.job_id == job and w.id in paused for w in workers):
                del self._caused[job]  # the whole group runs again
        if not self.on or not new:
            return
        for w in workers:
            if w.id not in new or not w.job_id or w.id in self._caused.get(w.job_id, ()):
                continue
            others = [
                o.id
                for o in workers
                if o.job_id == w.job_id and o.id != w.id and o.agent and o.state in ("running", "idle")
            ]
            caused = self._caused.setdefault(w.job_id, set())
            others = [o for o in others if o not in caused]
            if others:
                caused.update(others)
                log.info("all-stop: rank %s of job %s stopped; pausing %d", w.rank, w.job_id, len(others))
                self._spawn(self._pause(others), "all-stop pause")

    async def _pause(self, ids: list[str]) -> None:
        try:
            self.last = await self.control.pause({"workers": ids})
        except Exception:  # noqa: BLE001 - a failed group pause leaves the first stop as it is
            log.exception("all-stop: pausing the job's other workers failed")
