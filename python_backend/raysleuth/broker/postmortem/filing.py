"""Post-mortem on the broker: files crash records (sent by agents, or made here from Ray's record
of a worker that died hard: SIGKILL, segfault, os._exit, OOM), puts them on the timeline and the
stream, and tells the agents whether anyone watches (a crashed worker is held only then).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time

from raysleuth.broker.tasks import OwnedTasks
from raysleuth.broker.workers.snapshot import NODE_DIED, StateSnapshot
from raysleuth.model.crash import CrashRecord

log = logging.getLogger(__name__)

DEATH_TYPES = {"SYSTEM_ERROR": "worker_died", "NODE_OUT_OF_MEMORY": "oom", NODE_DIED: "worker_died"}
"""Ray's exit types of an unexpected death (a crash record each) and the record's kind."""

FAULT_TEXT_TIMEOUT_S = 10.0

_FAULT_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+) in (?P<function>\S+)')


class PostMortem:
    def __init__(self, crashes, timeline, table, relays, hub) -> None:
        self.crashes = crashes
        self.timeline = timeline
        self.table = table
        self.relays = relays
        self.hub = hub
        self._seen_alive: set[str] = set()
        """Workers this broker saw alive: only their deaths are news."""
        self._deaths_done: set[str] = set()
        self.tasks = OwnedTasks("post-mortem")

    def add_crash(self, rec: dict) -> CrashRecord:
        """File one record; fills the worker's identity from what the agent knew at the crash."""
        worker = rec.get("worker") or {}
        ident = rec.pop("identity", None) or {}
        rec.pop("hold_request", None)  # a record sent late (no broker at the crash) was not held
        for k in ("rank", "actor_class", "actor_name", "actor_id", "pid", "node_id", "node_ip", "job_id",
                  "worker_group", "roles", "role"):  # fmt: skip
            if worker.get(k) is None and ident.get(k) is not None:
                worker[k] = ident[k]
        if rec.get("task") and not worker.get("task"):
            worker["task"] = rec["task"]
        rec["worker"] = worker
        filed = self.crashes.add(rec)
        log.info("crash %s: %s %s", filed.id, filed.kind, filed.exc_type or "")
        self.timeline.add_event(
            {"rank": worker.get("rank"), "worker": worker.get("id"), "pid": worker.get("pid")},
            "crash",
            filed.time,
            {"crash": filed.id, "kind": filed.kind, "error": filed.exc_type or filed.message},
        )
        self.hub.publish("crash", filed.summary())
        self.hub.emit("crash-filed", filed)
        return filed

    def note_deaths(self, snap: StateSnapshot, reports: list[dict]) -> None:
        """Workers seen alive that died unexpectedly: a record each (made in the background)."""
        by_id = {r.get("id"): r for r in reports if r.get("id")}
        for sw in snap.workers:
            wid = sw.get("worker_id")
            if sw.get("worker_type") not in (None, "WORKER") or not wid:
                continue
            if sw.get("is_alive"):
                self._seen_alive.add(wid)
                continue
            kind = DEATH_TYPES.get(sw.get("exit_type") or "")
            seen = wid in self._seen_alive or (wid in by_id and not by_id[wid].get("goodbye"))
            if kind is None or not seen or wid in self._deaths_done:
                continue
            actor = any(
                a.get("pid") == sw.get("pid") and a.get("node_id") == sw.get("node_id") for a in snap.actors
            )
            if wid not in by_id and not actor:
                if sw.get("exit_type") == "SYSTEM_ERROR":  # a record only if Ray aborted it
                    self._deaths_done.add(wid)
                    self.tasks.spawn(
                        self.record_death(sw, None, only_if_ray_check=True),
                        f"looking at the death of {wid[:8]}",
                    )
                continue  # an idle pool worker of no actor nor agent: nothing else to look at
            if (
                sw.get("exit_type") == NODE_DIED
                and not actor
                and getattr(self.table.get(wid), "state", "idle") == "idle"
            ):
                self._deaths_done.add(wid)  # idle, gone with its node (a scale-down): nothing lost
                continue
            self._deaths_done.add(wid)
            log.info("worker %s died (%s): recording it", wid[:8], sw.get("exit_type"))
            self.tasks.spawn(self.record_death(sw, by_id.get(wid)), f"recording the death of {wid[:8]}")

    async def record_death(
        self, sw: dict, report: dict | None, only_if_ray_check: bool = False
    ) -> CrashRecord | None:
        wid = sw["worker_id"]
        kind = DEATH_TYPES[sw["exit_type"]]
        check = await self._ray_check(sw) if sw["exit_type"] == "SYSTEM_ERROR" else None
        if check is None and only_if_ray_check:
            return None
        w = self.table.get(wid)
        worker = (
            w.to_json() if w is not None else {"id": wid, "pid": sw.get("pid"), "node_id": sw.get("node_id")}
        )
        detail = (sw.get("exit_detail") or "").strip()
        fault = None
        path = (report or {}).get("fault_file")
        if path:
            try:
                relay = await self.relays.relay_for(sw.get("node_id"))
                fault = await asyncio.wait_for(relay.fault_text.remote(path), FAULT_TEXT_TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001 - the record still tells what Ray knows
                log.info("faulthandler text of %s: %s", wid[:8], exc)
        if fault and kind == "worker_died" and "Segmentation fault" in fault:
            kind = "segfault"
        last = dict(report) if report else None
        rec = {
            "kind": kind,
            "time": (sw.get("end_time_ms") or time.time() * 1000) / 1000.0,
            "exc_type": None,
            "message": (
                f"Ray aborted the worker: {check['check']}"
                if check
                else detail.splitlines()[0]
                if detail
                else f"the worker died ({sw.get('exit_type')})"
            ),
            "ray_check": check,
            "exit_type": sw.get("exit_type"),
            "exit_detail": detail,
            "faulthandler": fault,
            "frames": fault_frames(fault),
            "gpu": (last or {}).get("gpu"),
            "last_report": last,
            "worker": worker,
        }
        return self.add_crash(rec)

    async def _ray_check(self, sw: dict) -> dict | None:
        """The fatal Ray check in the dead worker's logs on its node ({check, file, text}), or None."""
        try:
            relay = await self.relays.relay_for(sw.get("node_id"))
            return await asyncio.wait_for(
                relay.fatal_check.remote(sw["worker_id"], sw.get("pid")), FAULT_TEXT_TIMEOUT_S
            )
        except Exception as exc:  # noqa: BLE001 - the record still tells what Ray knows
            log.info("fatal check of %s: %s", sw["worker_id"][:8], exc)
            return None

    async def close(self) -> None:
        await self.tasks.close()


def fault_frames(text: str | None) -> list[dict]:
    """faulthandler's 'File "x.py", line 12 in f' lines (innermost first) as record frames."""
    out: list[dict] = []
    for line in (text or "").splitlines():
        m = _FAULT_FRAME.match(line)
        if m:
            out.append({"path": m["path"], "line": int(m["line"]), "function": m["function"], "locals": {}})
        elif out and not line.strip():
            break  # the first thread's stack only: the one that faulted
    return out


def describe_exit(sw: dict | None) -> str | None:
    """Why a worker ended, in words, from Ray's record of it (None while Ray has it alive)."""
    if sw is None or sw.get("is_alive"):
        return None
    detail = (sw.get("exit_detail") or "").strip().splitlines()
    what = {
        "INTENDED_SYSTEM_EXIT": "it was stopped on purpose (ray.kill or job end)",
        "INTENDED_USER_EXIT": "it exited on purpose",
        "SYSTEM_ERROR": "it died unexpectedly",
        "USER_ERROR": "it exited with an error",
        "NODE_OUT_OF_MEMORY": "the node ran out of memory (OOM killer)",
    }
    text = what.get(str(sw.get("exit_type")), f"it exited ({sw.get('exit_type')})")
    return text + (f": {detail[0]}" if detail else "")
