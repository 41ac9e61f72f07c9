"""First-divergence watches (issue 26): `POST /v1/watches {path, line, expressions, ranks?, rtol?,
every?, stop?, step?}`. A watch is a snapshot point without frames that every rank in scope
passes (or every `every`-th pass); its rows come here (`watch-row` on the hub), are lined up by
pass count (or the `step` local), and the first pass where a rank differs files a divergence
case and, with `stop`, stops the job's ranks at the line once (a breakpoint of owner
`watch:<id>` with hit condition 1: each rank stops the next time it gets there).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from raysleuth.broker.points.service import audit_point, point_code
from raysleuth.model.case import divergence_case
from raysleuth.model.compare import DEFAULT_RTOL
from raysleuth.model.divergence import DivergenceFinder
from raysleuth.model.point import parse_watch
from raysleuth.model.unbounded import refuse_unbounded
from raysleuth.shared.errors import BadRequest, NotFound

if TYPE_CHECKING:
    from raysleuth.broker.events import EventHub
    from raysleuth.broker.points.service import PointService
    from raysleuth.broker.tasks import OwnedTasks
    from raysleuth.model.point import Point

log = logging.getLogger(__name__)

MAX_WATCHES = 32


@dataclass
class Watch:
    point: Point
    finder: DivergenceFinder
    stop: bool
    step: str | None
    job_id: str | None = None
    passes: dict[int, int] = field(default_factory=dict)
    """Rank → the highest pass count it sent."""
    divergence: dict | None = None

    def to_json(self) -> dict:
        counts = [self.passes.get(r, 0) for r in self.finder.ranks()] or [0]
        return {
            "id": self.point.id, "path": self.point.path, "line": self.point.line,
            "expressions": self.point.expressions, "ranks": sorted(self.finder.ranks()),
            "passes": min(counts), "compared": self.finder.compared, "stop": self.stop,
            "divergence": self.divergence,
        }  # fmt: skip


class WatchService:
    def __init__(
        self,
        points: PointService,
        hub: EventHub,
        tasks: OwnedTasks,
        live_ranks: Callable[[str], set[int]],
        clock: Callable[[], float] = time.time,
    ):
        """`live_ranks(job_id)`: the ranks of that job's live workers (the table's)."""
        self.live_ranks = live_ranks
        self.points = points
        self.hub = hub
        self.tasks = tasks
        self.clock = clock
        self._ids = itertools.count(1)
        self._watches: dict[str, Watch] = {}
        hub.on("watch-row", self._row)

    async def create(self, body: dict, client: dict | None = None) -> dict:
        if not isinstance(body, dict):
            raise BadRequest(
                "the body must be a JSON object", 'Send {"path": ..., "line": 12, "expressions": ["x"]}.'
            )
        if len(self._watches) >= MAX_WATCHES:
            raise BadRequest(
                f"at most {MAX_WATCHES} watches at once", "DELETE /v1/watches/{id} one you are done with."
            )
        rtol = body.get("rtol", DEFAULT_RTOL)
        if isinstance(rtol, bool) or not isinstance(rtol, (int, float)) or not 0 <= rtol < 1e6:
            raise BadRequest(f"'rtol' must be a number >= 0, not {rtol!r}", 'Send "rtol": 1e-5.')
        stop = body.get("stop", False)
        if not isinstance(stop, bool):
            raise BadRequest(f"'stop' must be true or false, not {stop!r}", 'Send "stop": true.')
        wid = f"watch-{next(self._ids)}-{int(self.clock()) % 100000}"
        point = parse_watch(body, wid, self.clock())
        refuse_unbounded(point_code(point), body.get("force"))
        ranks = set(point.scope.ranks) if point.scope.ranks is not None else None
        watch = Watch(point, DivergenceFinder(float(rtol), ranks), stop, (point.watch or {}).get("step"))
        watch.finder.live = lambda: self.live_ranks(watch.job_id) if watch.job_id is not None else set()
        self._watches[wid] = watch
        await self.points.add_point(point)
        audit_point(getattr(self.points, "audit", None), "watch", point, client, body.get("force") is True)
        log.info("watch %s at %s:%d on %s", wid, point.path, point.line, point.expressions)
        return {"id": wid}

    def get(self, wid: str) -> Watch:
        w = self._watches.get(wid)
        if w is None:
            raise NotFound(
                f"No watch {wid}.", "POST /v1/watches starts one; `raysleuth watch FILE:LINE EXPR`."
            )
        return w

    def listing(self) -> list[dict]:
        return [w.to_json() for w in self._watches.values()]

    async def delete(self, wid: str) -> None:
        self.get(wid)
        del self._watches[wid]
        await self.points.remove_snapshot(wid)

    def _row(self, item) -> None:
        sid, row = item
        w = self._watches.get(sid)
        if w is None:
            return
        rank = row.get("rank")
        if isinstance(rank, int) and isinstance(row.get("pass"), int):
            w.passes[rank] = max(w.passes.get(rank, 0), row["pass"])
        if w.job_id is None:
            w.job_id = row.get("job_id")
        key = row.get("step") if w.step else row.get("pass")
        found = w.finder.add(row, key)
        if found is None:
            return
        case = divergence_case(
            {"id": sid, "path": w.point.path, "line": w.point.line}, found, w.job_id, self.clock()
        )
        w.divergence = {k: found.get(k) for k in ("pass", "step", "ranks", "expression")} | {"case": case.id}
        self.hub.emit("case", case)
        if w.stop:
            self.tasks.spawn(self._stop_ranks(w), f"stopping the ranks of {sid}")

    async def _stop_ranks(self, w: Watch) -> None:
        ranks = sorted(w.finder.ranks())
        await self.points.put_file(
            {
                "path": w.point.path, "owner": f"watch:{w.point.id}",
                "breakpoints": [{"line": w.point.line, "ranks": ranks, "hitCondition": "1"}],
            },
            who=f"{w.point.id} found a divergence",
        )  # fmt: skip
        log.info("%s: stopping ranks %s at %s:%d", w.point.id, ranks, w.point.path, w.point.line)
