"""Which worker an attach (or a CLI command) names: by worker id (or a unique prefix) or by rank.

Pure function of the worker table, so the rules are unit-tested.
"""

from __future__ import annotations

from raysleuth.model.worker import Worker
from raysleuth.shared.errors import BadRequest, NotFound


def _describe(w: Worker) -> str:
    return f"{w.id[:8]} (job {w.job_id}, pid {w.pid}, {w.actor_class or w.task or 'worker'}, {w.state})"


def resolve_target(workers: list[Worker], args: dict) -> Worker:
    live = [w for w in workers if w.state not in ("exited",)]
    if args.get("worker") is not None:
        wid = str(args["worker"])
        hits = [w for w in workers if w.id == wid] or [w for w in workers if w.id.startswith(wid)]
        if not hits:
            raise NotFound(f"No worker with id {wid}.", "List workers with `raysleuth list`.")
        if len(hits) > 1:
            raise BadRequest(
                f"Worker id prefix {wid} matches {len(hits)} workers.", "Give more characters of the id."
            )
        if hits[0].state == "exited":
            raise BadRequest(
                f"Worker {wid[:8]} has exited.",
                "Pick a live worker; for a crashed one open its crash record.",
            )
        return hits[0]
    if args.get("rank") is not None:
        try:
            rank = int(args["rank"])
        except (TypeError, ValueError):
            raise BadRequest(f"rank must be an integer, not {args['rank']!r}.", 'e.g. {"rank": 0}') from None
        hits = [w for w in live if w.rank == rank]
        if args.get("job"):
            hits = [w for w in hits if w.job_id == args["job"]]
        if not hits:
            ranks = sorted({w.rank for w in live if w.rank is not None})
            raise NotFound(
                f"No live worker has rank {rank}.",
                f"Ranks seen now: {ranks or 'none'}. Workers set it with raysleuth.set_rank() or RANK.",
            )
        jobs = {w.job_id for w in hits}
        if len(jobs) > 1:
            listing = "; ".join(_describe(w) for w in hits)
            raise BadRequest(
                f"Rank {rank} is taken by workers of {len(jobs)} jobs: {listing}.",
                'Add "job": "<job id>" to the attach arguments, or attach by worker id.',
            )
        paused = [w for w in hits if w.state == "paused"]
        pick = paused or hits
        return max(pick, key=lambda w: w.last_seen or 0)
    raise BadRequest(
        "attach needs a target: {token, worker: ID} or {token, rank: N}.",
        "Find ids and ranks with `raysleuth list`.",
    )
