"""The point table of one armed set: which points this worker arms, per file and line, and which
of them were found in loaded code. Built whole by the agent thread; the line hooks only read a
table once it is complete (the trigger swaps it in).

Each point wraps the shared model's `Point` (parsed once from the broker's spec) with what only
this worker has: its hit counts, the compiled condition and the logpoint rate state.
"""

from __future__ import annotations

import os

from raysleuth.model.point import Point


class ArmedPoint:
    """One point in this worker. The fields the line hook reads are copied flat from the model
    point (slots, no lookups through it per pass)."""

    __slots__ = (
        "point",
        "id",
        "kind",
        "line",
        "scope",
        "cond",
        "hit",
        "log",
        "count",
        "hits",
        "fired",
        "dead",
        "error",
        "log_second",
        "log_sent",
        "log_dropped",
        "exprs",
    )

    def __init__(self, point: Point) -> None:
        self.point = point
        """The cluster's point, as the broker sent it."""
        self.id = point.id
        self.kind = point.kind
        self.line = point.line
        self.scope = point.scope
        self.cond = compile(point.rest, "<condition>", "eval") if point.rest else None
        """The condition without its scope, compiled once."""
        self.hit = point.hit
        self.log = point.log_message or None
        self.count = int(point.count or 0)
        """Snapshot points: captures before the point ends itself (0: no limit)."""
        self.hits = 0
        """Passes whose condition held (what the hit condition counts)."""
        self.fired = 0
        self.dead = False
        """Ruled out (rank known now) or done (snapshot count reached): skipped until re-armed."""
        self.error: str | None = None
        """The first error of its condition, reported once."""
        self.log_second = 0
        self.log_sent = 0
        self.log_dropped = 0
        self.exprs = [(e, compile(e, "<expression>", "eval")) for e in point.expressions or ()]
        """Snapshot points: the expressions to record, compiled once."""

    @classmethod
    def from_spec(cls, spec: dict) -> ArmedPoint:
        """Raises on a spec the model cannot read, or a condition that does not compile."""
        return cls(Point.from_spec(spec))

    def carry_over(self, prev: ArmedPoint) -> None:
        """The same point arrived again (a re-arm): keep its counts."""
        self.hits, self.fired, self.dead = prev.hits, prev.fired, prev.dead

    def matches_file(self, filename: str) -> bool:
        f = os.path.normpath(filename)
        p = self.point
        if f == p.path:
            return True
        return bool(p.rel) and f.endswith(os.sep + (p.rel or ""))

    def __repr__(self) -> str:
        return f"ArmedPoint({self.id} {self.kind} {self.point.path}:{self.line})"


class PointTable:
    """One set of points armed in this worker, and where their code was found."""

    def __init__(self, points: list[ArmedPoint] | None = None, errors: dict[str, str] | None = None) -> None:
        self.points: list[ArmedPoint] = points or []
        """The points whose scope can match this worker."""
        self.errors: dict[str, str] = errors or {}
        """Point id → why its spec was refused."""
        self.lines: dict[str, dict[int, list[ArmedPoint]]] = {}
        """co_filename → line → points, for the code found so far: what the line hooks read."""
        self.armed: set[str] = set()
        """Ids of points whose code was found and instrumented."""
        self.scanned_modules: set[str] = set()
        """Module files looked through since the set was armed (for modules imported later)."""
        self._file_points: dict[str, list[ArmedPoint]] = {}
        """co_filename → points of that file (empty list: checked, none)."""

    @classmethod
    def build(cls, specs: list[dict], identity: dict, previous: PointTable | None) -> PointTable:
        """The points of `specs` whose scope can match `identity`, counts kept from `previous`."""
        points: list[ArmedPoint] = []
        errors: dict[str, str] = {}
        old = {p.id: p for p in previous.points} if previous is not None else {}
        for spec in specs:
            try:
                p = ArmedPoint.from_spec(spec)
            except Exception as exc:  # noqa: BLE001 - the broker validates; a bad one is reported
                errors[str(spec.get("id"))] = f"{type(exc).__name__}: {exc}"
                continue
            prev = old.get(p.id)
            if prev is not None:
                p.carry_over(prev)
            if p.dead or p.scope.match(identity) is False:
                continue
            points.append(p)
        return cls(points, errors)

    def points_for_file(self, filename: str) -> list[ArmedPoint]:
        pts = self._file_points.get(filename)
        if pts is None:
            pts = [p for p in self.points if p.matches_file(filename)]
            self._file_points[filename] = pts
        return pts

    def add(self, filename: str, pts: list[ArmedPoint], lines: set[int]) -> None:
        """Code of `filename` covering `lines` was armed: its points on those lines fire now."""
        table = self.lines.setdefault(filename, {})
        for p in pts:
            if p.line in lines:
                at = table.setdefault(p.line, [])
                if p not in at:
                    at.append(p)
                self.armed.add(p.id)

    def missing(self) -> list[ArmedPoint]:
        """Points whose code was not found yet."""
        return [p for p in self.points if p.id not in self.armed]
