"""The cluster's breakpoints, logpoints and snapshot points, as the broker keeps them.

Breakpoints are set per file and per owner (`PUT /v1/breakpoints` replaces that owner's points
in that file, as DAP's setBreakpoints does for one editor); snapshot points are added one at a
time and collect rows. Every change goes to the agents as one list of specs (the registry hands
it out with each heartbeat; Ray's KV holds it for workers that start). The set is saved in the
state dir, so a broker restart re-arms what the user had.

Code a point runs in the workers (a condition, a logpoint's `{…}`, snapshot expressions) that the
unbounded check flags is refused unless the request says `force: true`; every new point that
runs code goes to the audit log.
"""

from __future__ import annotations

import collections
import itertools
import json
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

from raysleuth.model.point import DEFAULT_OWNER, Point, log_expressions, parse_owner, parse_path
from raysleuth.model.unbounded import refuse_unbounded
from raysleuth.shared.errors import BadRequest, NotFound
from raysleuth.shared.limits import MAX_POINTS, MAX_POINTS_PER_FILE
from raysleuth.shared.privfiles import write_private

log = logging.getLogger(__name__)

MAX_SNAPSHOT_ROWS = 2000
"""Rows kept per snapshot point (ranks × captures)."""


class PointSet:
    """The points themselves: pure data and its file, no Ray, no events."""

    def __init__(
        self, state_dir: Path | None, resolve_group: Callable[[str], dict | None] | None = None
    ) -> None:
        self.resolve_group = resolve_group
        """Group name → its definition now (None: no such group); `[group NAME]` scopes need it."""
        self.files: dict[str, list[Point]] = {}
        """Path → that file's breakpoints of every owner, in line order."""
        self.snapshots: dict[str, Point] = {}
        """Snapshot id → its point."""
        self.rows: dict[str, list[dict]] = {}
        """Snapshot id → the rows captured so far."""
        self._ids = itertools.count(1)
        self._file = Path(state_dir) / "breakpoints.json" if state_dir else None
        self._load()

    # --- breakpoints ----------------------------------------------------------------------

    def put_file(self, body: dict) -> tuple[str, str, list[Point]]:
        """Replace one owner's points in one file; returns (path, owner, that owner's new points)."""
        if not isinstance(body, dict):
            raise BadRequest("the body must be a JSON object", 'Send {"path": ..., "breakpoints": [...]}.')
        path = parse_path(body)
        owner = parse_owner(body.get("owner"))
        bps = body.get("breakpoints")
        if not isinstance(bps, list):
            raise BadRequest(
                "'breakpoints' must be a list", 'Send "breakpoints": [{"line": 12}] (empty clears).'
            )
        if len(bps) > MAX_POINTS_PER_FILE:
            raise BadRequest(
                f"{len(bps)} breakpoints in one file; at most {MAX_POINTS_PER_FILE} are allowed",
                "Use conditions or rank scopes instead of many points (the broker's"
                " RAYSLEUTH_MAX_POINTS_PER_FILE sets the bound).",
            )
        mine = [Point.parse_breakpoint(path, bp, root=body.get("root"), owner=owner) for bp in bps]
        for p in mine:
            self._check_groups(p)
        refuse_unbounded((code for p in mine for code in point_code(p)), body.get("force"))
        others = [p for p in self.files.get(path, ()) if p.owner != owner]
        total = sum(len(ps) for f, ps in self.files.items() if f != path) + len(others) + len(mine)
        if total > MAX_POINTS:
            raise BadRequest(
                f"the cluster set would hold {total} breakpoints; at most {MAX_POINTS} are allowed",
                "Remove some (DELETE /v1/breakpoints?owner=...) or raise the broker's RAYSLEUTH_MAX_POINTS.",
            )
        merged = sorted(others + mine, key=lambda p: (p.line, p.owner))
        if merged:
            self.files[path] = merged
        else:
            self.files.pop(path, None)
        self._save()
        return path, owner, sorted(mine, key=lambda p: p.line)

    def clear(self, owner: str | None = None) -> int:
        """Remove every breakpoint (owner None) or only one owner's; returns how many went."""
        gone = 0
        for path in list(self.files):
            keep = [p for p in self.files[path] if owner is not None and p.owner != owner]
            gone += len(self.files[path]) - len(keep)
            if keep:
                self.files[path] = keep
            else:
                del self.files[path]
        self._save()
        return gone

    def breakpoints(self) -> list[Point]:
        return [p for path in sorted(self.files) for p in self.files[path]]

    # --- snapshot points ------------------------------------------------------------------

    def add_snapshot(self, body: dict) -> Point:
        if not isinstance(body, dict):
            raise BadRequest("the body must be a JSON object", 'Send {"path": ..., "line": 12}.')
        sid = f"snap-{next(self._ids)}-{int(time.time()) % 100000}"
        point = Point.parse_snapshot(body, sid, time.time(), owner=parse_owner(body.get("owner")))
        self._check_groups(point)
        refuse_unbounded(point_code(point), body.get("force"))
        return self.keep_snapshot(point)

    def _check_groups(self, p: Point) -> None:
        for name in p.scope.groups:
            if self.resolve_group is None or self.resolve_group(name) is None:
                raise BadRequest(
                    f"line {p.line}: no rank group {name!r} for [group {name}]",
                    f"Make it first (PUT /v1/groups/{name}, `raysleuth group {name} --ranks 0,3`, or"
                    " Make Rank Group… in the Parallel Stacks view); GET /v1/groups lists them.",
                )

    def keep_snapshot(self, point: Point) -> Point:
        """Hold a snapshot point (or a divergence watch's) and a fresh list for its rows."""
        self.snapshots[point.id] = point
        self.rows[point.id] = []
        return point

    def snapshot(self, sid: str) -> Point:
        snap = self.snapshots.get(sid)
        if snap is None:
            raise NotFound(f"No snapshot point {sid}.", "List them with GET /v1/snapshots.")
        return snap

    def snapshot_rows(self, sid: str) -> list[dict]:
        self.snapshot(sid)
        return self.rows[sid]

    def remove_snapshot(self, sid: str) -> None:
        self.snapshot(sid)
        del self.snapshots[sid]
        self.rows.pop(sid, None)

    def add_row(self, sid: str, row: dict) -> bool:
        """File a captured row under its snapshot point; False when the point is gone."""
        rows = self.rows.get(sid)
        if rows is None:
            return False
        if len(rows) < MAX_SNAPSHOT_ROWS:
            rows.append(row)
        return True

    # --- for the agents -------------------------------------------------------------------

    def specs(self) -> list[dict]:
        """What the agents get: every point, its `[group …]` scopes resolved to their definitions now."""
        points = self.breakpoints() + list(self.snapshots.values())
        return [self._resolved(p.to_spec(), p) for p in points]

    def uses_groups(self) -> bool:
        return any(p.scope.groups for p in self.breakpoints() + list(self.snapshots.values()))

    def _resolved(self, spec: dict, p: Point) -> dict:
        if p.scope.groups:
            resolve = self.resolve_group or (lambda _name: None)
            spec["scope"]["group_defs"] = [resolve(n) or {"name": n, "missing": True} for n in p.scope.groups]
        return spec

    # --- persistence ----------------------------------------------------------------------

    def _save(self) -> None:
        if self._file is None:
            return
        data = {"version": 2, "points": [p.to_spec() for p in self.breakpoints()]}
        try:
            write_private(self._file, json.dumps(data, indent=1))
        except OSError as exc:
            log.warning("saving breakpoints to %s failed: %s", self._file, exc)

    def _load(self) -> None:
        if self._file is None or not self._file.exists():
            return
        try:
            data = json.loads(self._file.read_text())
            points = [Point.from_spec(d) for d in data.get("points") or ()]
            if data.get("files"):  # the first format: plain dicts per file, no owner
                points += [_from_v1(p) for bps in data["files"].values() for p in bps]
        except (OSError, ValueError, AttributeError, KeyError, TypeError) as exc:
            log.warning("ignoring unreadable %s: %s", self._file, exc)
            return
        for p in points:
            self.files.setdefault(p.path, []).append(p)
        for bps in self.files.values():
            bps.sort(key=lambda p: (p.line, p.owner))


def point_code(p: Point) -> list[tuple[str, str]]:
    """(what, expression) for each piece of Python the point runs in a worker."""
    out = []
    if p.rest and p.rest.strip():
        out.append((f"the condition of line {p.line}", p.rest.strip()))
    for e in log_expressions(p.log_message or ""):
        out.append((f"{{{e[:60]}}} in the logMessage of line {p.line}", e))
    for e in p.expressions or ():
        out.append((f"the expression {e[:60]!r} at line {p.line}", e))
    return out


def audit_point(audit, action: str, p: Point, client: dict | None, force: bool) -> None:
    """One audit line for a point that runs code: its expressions, where and for whom."""
    code = [e for _, e in point_code(p)]
    if audit is None or not code:
        return
    audit.record(
        action, client=client, expression=code[0] if len(code) == 1 else None, workers=None,
        expressions=code if len(code) > 1 else None, path=p.path, line=p.line,
        scope=p.to_json().get("scope"), owner=p.owner, point=p.id, force=force,
    )  # fmt: skip


def _from_v1(d: dict) -> Point:
    return Point.parse_breakpoint(
        os.path.normpath(d["path"]),
        {k: d.get(k) for k in ("line", "condition", "hitCondition", "logMessage", "ranks")},
        owner=DEFAULT_OWNER,
    )


class PointService:
    """Publishes the set: to the agents through `agents.set_points`, listings on the hub.

    `reports` and `live_ids` are callables giving the agents' latest reports and the ids of live
    workers (for the number of workers that have each point armed now).
    """

    def __init__(self, points: PointSet, agents, hub, reports, live_ids, audit=None) -> None:
        self.points = points
        self.audit = audit
        """The audit log (broker/audit.py), or None (tests)."""
        self.agents = agents
        self.hub = hub
        self._reports = reports
        self._live_ids = live_ids
        self._published: list | None = None

    def armed_counts(self) -> collections.Counter:
        """Point id → number of live workers that have it armed now (from their reports)."""
        return collections.Counter({pid: len(ws) for pid, ws in self.armed_workers().items()})

    def armed_workers(self) -> dict[str, list[dict]]:
        """Point id → the live workers that have it armed now: [{worker, rank, pid}], by rank."""
        live = self._live_ids()
        out: dict[str, list[dict]] = collections.defaultdict(list)
        for rep in self._reports():
            if rep.get("id") in live and rep.get("goodbye") is None:
                who = {"worker": rep.get("id"), "rank": rep.get("rank"), "pid": rep.get("pid")}
                for pid in rep.get("armed") or ():
                    out[pid].append(who)
        for ws in out.values():
            ws.sort(key=lambda w: (w["rank"] is None, w["rank"] or 0, w["pid"] or 0))
        return out

    def pending(self) -> int:
        """Live workers with an agent that have not taken the current set yet (the armed counts
        may still grow until this is 0)."""
        version = getattr(self.agents, "points_version", None)
        if version is None:
            return 0
        live = self._live_ids()
        return sum(
            1
            for rep in self._reports()
            if rep.get("id") in live and rep.get("goodbye") is None and rep.get("bp_version") != version
        )

    def _listed(self, p: Point, armed: dict[str, list[dict]], pending: int) -> dict:
        on = armed.get(p.id, [])
        return dict(p.to_json(len(on)), armed_on=on, pending=pending)

    def breakpoint_listing(self) -> list[dict]:
        armed, pending = self.armed_workers(), self.pending()
        return [self._listed(p, armed, pending) for p in self.points.breakpoints()]

    def snapshot_listing(self) -> list[dict]:
        counts = self.armed_counts()
        return [
            dict(s.to_json(counts.get(s.id, 0)), rows=len(self.points.rows.get(s.id, ())))
            for s in sorted(self.points.snapshots.values(), key=lambda s: s.created or 0)
        ]

    def publish_listing(self) -> None:
        """A `breakpoints` event when the listing (armed counts included) changed."""
        listing = self.breakpoint_listing()
        if listing != self._published:
            self._published = listing
            self.hub.publish("breakpoints", listing)

    async def push(self) -> None:
        """Hand the current set to the agents: each gets it with its next heartbeat."""
        await self.agents.set_points(self.points.specs())
        self.publish_listing()

    async def put_file(self, body: dict, who: str = "", client: dict | None = None) -> dict:
        before = {p.id for p in self.points.breakpoints()}
        path, owner, mine = self.points.put_file(body)
        for p in mine:
            if p.id not in before:
                audit_point(self.audit, "breakpoint", p, client, body.get("force") is True)
        log.info(
            "breakpoints of %s by owner %s set to lines %s%s",
            path,
            owner,
            [p.line for p in mine] or "none",
            f" ({who})" if who else "",
        )
        await self.push()
        armed, pending = self.armed_workers(), self.pending()
        return {"path": path, "owner": owner, "breakpoints": [self._listed(p, armed, pending) for p in mine]}

    async def clear(self, owner: str | None, who: str = "") -> int:
        gone = self.points.clear(owner)
        log.info("%d cluster breakpoints of %s deleted (%s)", gone, owner or "every owner", who or "?")
        await self.push()
        return gone

    async def add_snapshot(self, body: dict, client: dict | None = None) -> Point:
        snap = self.points.add_snapshot(body)
        audit_point(self.audit, "snapshot", snap, client, body.get("force") is True)
        await self.push()
        return snap

    async def add_point(self, point: Point) -> None:
        """A point made elsewhere (a divergence watch), held and published like a snapshot point."""
        self.points.keep_snapshot(point)
        await self.push()

    async def remove_snapshot(self, sid: str) -> None:
        self.points.remove_snapshot(sid)
        await self.push()
