"""The hang radar's view of many stacks (issue 12): group workers whose main threads stand at the
same frames, name the rank that holds the others back, and write it all as plain text.

Pure functions over the JSON shapes of `GET /v1/stacks`: the broker, the watch mode and the CLI
share them. Standard library only; imports neither the agent nor the broker.
"""

from __future__ import annotations

import os
import re
from collections import Counter

from raysleuth.model import frames as libframes
from raysleuth.model.scope import format_ranks

ONE_LINE_FRAMES = 3
"""User frames shown in a group's one-line summary before `← …`."""

NAMED_LIBRARY_FRAMES = 4
"""Function names a collapsed run of library frames lists before `…`."""

_WRAPPER = re.compile(r"(wrapper|wrapped|inner|decorator|decorated)$", re.IGNORECASE)
"""Names of decorators' inner functions (torch's c10d logger, Ray's client-mode hooks): the
one-line summary names the call they wrap instead."""

_WAITING = ("scheduled", "started")
"""Flight-recorder states of a collective a rank has entered and not yet finished."""


def rank_ranges(ranks: list[int]) -> str:
    """[0, 1, 2, 4] → `0-2,4` (sorted, duplicates dropped)."""
    return format_ranks(set(ranks))


def is_library(path: str) -> bool:
    """Whether a frame's file is a library's, not the user's (`model/frames.py` has the rule):
    the one-line summary shows such frames by name only, the text folds runs of them."""
    return libframes.is_library(path)


def _lib(frame: dict) -> bool:
    return libframes.flagged(frame)


def main_thread(worker: dict) -> dict | None:
    """The thread the grouping looks at: the one marked `main`, else the first; None if none."""
    threads = worker.get("threads") or []
    for t in threads:
        if t.get("main"):
            return t
    return threads[0] if threads else None


def stack_signature(worker: dict) -> tuple:
    """The grouping key of a worker: its main thread's frames as (path, function, line),
    innermost first; () for a worker without a stack. Equal signatures, equal place."""
    thread = main_thread(worker)
    if thread is None:
        return ()
    return tuple((f.get("path"), f.get("function"), f.get("line")) for f in thread.get("frames") or [])


def _has_stack(worker: dict) -> bool:
    return main_thread(worker) is not None


def _job_order(workers: list[dict]) -> list:
    """Job ids in the order they first appear."""
    return list(dict.fromkeys(w.get("job_id") for w in workers))


def _rank_key(worker: dict) -> tuple:
    rank = worker.get("rank")
    return (rank is None, rank if rank is not None else 0, str(worker.get("worker")))


def group_stacks(workers: list[dict]) -> list[dict]:
    """Workers of one job whose main threads stand at the same frames, as groups.

    Workers without a stack (an error, no threads) belong to no group: the caller lists them
    apart. Within a job, groups come largest first (then lowest rank); with two or more groups,
    every group strictly smaller than the largest is a `minority` (a tie flags none). In a job
    with ranks only groups of ranks are compared: its unranked workers are never a minority.
    """
    out: list[dict] = []
    with_stack = [w for w in workers if _has_stack(w)]
    for job in _job_order(with_stack):
        members: dict[tuple, list[dict]] = {}
        for w in sorted((w for w in with_stack if w.get("job_id") == job), key=_rank_key):
            members.setdefault(stack_signature(w), []).append(w)
        groups = []
        for ws in members.values():
            ranks = sorted({w["rank"] for w in ws if w.get("rank") is not None})
            groups.append(
                {
                    "job_id": job,
                    "ranks": ranks,
                    "ranks_text": rank_ranges(ranks),
                    "workers": [w.get("worker") for w in ws],
                    "count": len(ws),
                    "frames": list((main_thread(ws[0]) or {}).get("frames") or []),
                    "minority": False,
                }
            )
        groups.sort(key=lambda g: (-g["count"], g["ranks"][0] if g["ranks"] else float("inf")))
        # In a job with ranks, only ranks can hold the others back: a helper task or pool
        # worker of the job (no rank) stands elsewhere by design.
        peers = [g for g in groups if g["ranks"]] or groups
        if len(peers) >= 2:
            largest = max(g["count"] for g in peers)
            for g in peers:
                g["minority"] = g["count"] < largest
        out.extend(groups)
    return out


def _who(ranks: list[int], count: int) -> str:
    """`rank 3`, `ranks 0-2`, `2 workers`, `ranks 0-2 and 1 more`: a group's members."""
    if not ranks:
        return "1 worker" if count == 1 else f"{count} workers"
    text = ("rank " if len(ranks) == 1 else "ranks ") + rank_ranges(ranks)
    if count > len(ranks):
        text += f" and {count - len(ranks)} more"
    return text


def _label(rank: int | None, worker_id) -> str:
    return f"rank {rank}" if rank is not None else f"worker {str(worker_id)[:8]}"


def _by_collective(job_workers: list[dict], collectives: list[dict]) -> list[dict]:
    """Per process group, the ranks whose last entered collective is older than the newest."""
    by_id = {w.get("worker"): w for w in job_workers}
    last: dict[str, dict] = {}  # per group: worker -> its newest entry
    for c in collectives:
        if c.get("worker") not in by_id or not isinstance(c.get("seq"), int):
            continue
        per = last.setdefault(str(c.get("group")), {})
        prev = per.get(c["worker"])
        if prev is None or c["seq"] > prev["seq"]:
            per[c["worker"]] = c
    out: list[dict] = []
    seen: set = set()
    for group in sorted(last):
        entries = last[group]
        top = max(e["seq"] for e in entries.values())
        ahead = [e for e in entries.values() if e["seq"] == top]
        late = [e for e in entries.values() if e["seq"] < top]
        if not late:
            continue
        ahead_ranks = [_global_rank(e, by_id) for e in ahead]
        op = _op_name(Counter(e.get("op") for e in ahead).most_common(1)[0][0])
        waiting = any(e.get("state") in _WAITING for e in ahead)
        ahead_who = _who([r for r in ahead_ranks if r is not None], len(ahead))
        where = f"wait in {op} #{top}" if waiting else f"finished {op} #{top}"
        for e in sorted(late, key=lambda e: (e["seq"], str(e["worker"]))):
            if e["worker"] in seen:
                continue
            seen.add(e["worker"])
            rank = _global_rank(e, by_id)
            why = f"{_label(rank, e['worker'])} last entered #{e['seq']}; {ahead_who} {where}"
            out.append({"rank": rank, "worker": e["worker"], "why": why})
    return out


def _op_name(op) -> str:
    """The collective's name; the agent writes "?" for one it did not read (a finished one)."""
    return "collective" if op in (None, "", "?") else str(op)


def _global_rank(entry: dict, by_id: dict) -> int | None:
    """The worker's own rank where known (a subgroup's rank differs), else the group's."""
    rank = by_id[entry["worker"]].get("rank")
    return rank if rank is not None else entry.get("rank")


def _by_step(job_workers: list[dict]) -> list[dict]:
    stepped = [w for w in job_workers if isinstance(w.get("step"), int)]
    if len(stepped) < 2:
        return []
    top = max(w["step"] for w in stepped)
    return [
        {"rank": w.get("rank"), "worker": w.get("worker"), "why": f"last step {w['step']}; others {top}"}
        for w in sorted(stepped, key=_rank_key)
        if w["step"] < top
    ]


def _by_minority(job_groups: list[dict], job_workers: list[dict]) -> list[dict]:
    if not any(g["minority"] for g in job_groups):
        return []
    ranks = {w.get("worker"): w.get("rank") for w in job_workers}
    ranked = any(g["ranks"] for g in job_groups)
    peers = [g for g in job_groups if g["ranks"]] or job_groups
    largest = peers[0]
    total = sum(len(g["ranks"]) if ranked else g["count"] for g in peers)
    size = len(largest["ranks"]) if ranked else largest["count"]
    why = f"stack differs from {_who(largest['ranks'], size)} ({size} of {total})"
    return [
        {"rank": ranks.get(wid), "worker": wid, "why": why}
        for g in job_groups
        if g["minority"]
        for wid in g["workers"]
        if not ranked or ranks.get(wid) is not None
    ]


def find_behind(workers: list[dict], groups: list[dict], collectives: list[dict]) -> list[dict]:
    """The ranks that hold the others back, per job: by collective sequence number where the
    flight recorder tells, else by the last `step` event, else the workers of minority groups."""
    out: list[dict] = []
    for job in _job_order(workers):
        job_workers = [w for w in workers if w.get("job_id") == job]
        job_groups = [g for g in groups if g.get("job_id") == job]
        out.extend(
            _by_collective(job_workers, collectives or [])
            or _by_step(job_workers)
            or _by_minority(job_groups, job_workers)
        )
    return out


def _place(frame: dict) -> str:
    return f"{frame.get('function')} {os.path.basename(frame.get('path') or '?')}:{frame.get('line')}"


def _called(library: list[dict]) -> str:
    """The library function the user's code called: the outermost of the library frames above
    it that is no decorator's wrapper (`ray.get` is `get`, not `auto_init_wrapper`)."""
    for f in reversed(library):
        name = str(f.get("function"))
        if not _WRAPPER.search(name):
            return name
    return str(library[-1].get("function"))


def summary(frames: list[dict]) -> str:
    """A stack in one line, innermost first: the library call the user's code is in (by name),
    then up to ONE_LINE_FRAMES user frames: `all_reduce ← train_step train.py:88 ← fit train.py:120`."""
    if not frames:
        return "(no frames)"
    first_user = next((i for i, f in enumerate(frames) if not _lib(f)), None)
    if first_user is None:  # nothing of the user's: the innermost frames as they are
        parts = [_place(f) for f in frames[:ONE_LINE_FRAMES]]
        rest = frames[ONE_LINE_FRAMES:]
    else:
        parts = [_called(frames[:first_user])] if first_user > 0 else []
        user = [f for f in frames[first_user:] if not _lib(f)]
        parts += [_place(f) for f in user[:ONE_LINE_FRAMES]]
        rest = user[ONE_LINE_FRAMES:]
    return " ← ".join(parts + (["…"] if rest else []))


def _frame_line(f: dict, indent: str) -> str:
    code = f" | {f['code'].strip()}" if f.get("code") else ""
    return f"{indent}{f.get('function')}  {f.get('path')}:{f.get('line')}{code}"


def folded_frames(frames: list[dict]) -> list[dict | list[dict]]:
    """The frames (innermost first) with each run of two or more library frames as one list,
    but the innermost frame, where the worker stands, kept: `[wait, [_wait, get], train_step,
    [inner, inner, func, ...], ...]`. A stack with no frame of the user's stays whole."""
    if all(_lib(f) for f in frames):
        return list(frames)
    out: list[dict | list[dict]] = list(frames[:1])
    run: list[dict] = []
    for f in frames[1:]:
        if _lib(f):
            run.append(f)
            continue
        out += [run] if len(run) > 1 else run
        run = []
        out.append(f)
    out += [run] if len(run) > 1 else run
    return out


def _frame_lines(frames: list[dict], indent: str, all_frames: bool = False) -> list[str]:
    """A group's frames as lines; runs of library frames folded into one unless `all_frames`."""
    if all_frames:
        return [_frame_line(f, indent) for f in frames]
    lines = []
    for f in folded_frames(frames):
        if isinstance(f, dict):
            lines.append(_frame_line(f, indent))
            continue
        names = [str(x.get("function")) for x in f[:NAMED_LIBRARY_FRAMES]]
        more = ", …" if len(f) > NAMED_LIBRARY_FRAMES else ""
        lines.append(f"{indent}… {len(f)} library frames: {', '.join(names)}{more}")
    return lines


def _collective_lines(result: dict, job, indent: str) -> list[str]:
    jobs = {w.get("worker"): w.get("job_id") for w in result.get("workers") or []}
    entries = [c for c in result.get("collectives") or [] if jobs.get(c.get("worker")) == job]
    lines = []
    for group in sorted({str(c.get("group")) for c in entries}):
        at: dict[tuple, list[int]] = {}
        for c in entries:
            if str(c.get("group")) == group:
                at.setdefault((c.get("seq"), c.get("op"), c.get("state")), []).append(c.get("rank"))
        parts = [
            f"{_who([r for r in ranks if r is not None], len(ranks))} at {_op_name(op)} #{seq} ({state})"
            for (seq, op, state), ranks in sorted(at.items(), key=lambda kv: -(kv[0][0] or 0))
        ]
        lines.append(f"{indent}process group {group}: " + "; ".join(parts))
    return lines


def format_text(result: dict, all_frames: bool = False) -> str:
    """The grouped view as plain text: what `raysleuth stacks` prints and "Copy as text" copies.
    Runs of library frames are folded into one line each, unless `all_frames`."""
    workers = result.get("workers") or []
    groups = result.get("groups") or []
    behind = {b.get("worker"): b for b in result.get("behind") or []}
    lines: list[str] = []
    for job in _job_order(workers):
        job_workers = [w for w in workers if w.get("job_id") == job]
        job_groups = [g for g in groups if g.get("job_id") == job]
        lines.append(f"job {job if job is not None else '(none)'}: {len(job_workers)} worker(s)")
        for g in job_groups:
            flag = "  <- minority" if g.get("minority") else ""
            lines.append(f"  {_who(g['ranks'], g['count'])} ({g['count']}): {summary(g['frames'])}{flag}")
            lines += _frame_lines(g["frames"], "      ", all_frames)
        missing = [w for w in job_workers if not _has_stack(w)]
        for w in sorted(missing, key=_rank_key):
            who = _label(w.get("rank"), w.get("worker"))
            lines.append(f"  {who} (pid {w.get('pid')}): no stack: {w.get('error')}")
            if w.get("hint"):
                lines.append(f"      hint: {w['hint']}")
        lines += _collective_lines(result, job, "  ")
        for w in sorted(job_workers, key=_rank_key):
            b = behind.get(w.get("worker"))
            if b is None:
                continue
            lines.append(f"  behind: {_label(b.get('rank'), b.get('worker'))}: {b.get('why')}")
    if not workers:
        lines.append("no workers selected")
    return "\n".join(lines)


def collectives_queue(collectives: list[dict], workers: list[dict], behind: list[dict]) -> list[dict]:
    """The collectives queue (issue 27), the Ray stand-in for MPI message queues: per process
    group and rank, the last collective enqueued, started and completed (flight recorder sequence
    numbers), its op, and whether that rank is the one behind. By group, then rank."""
    ranks = {w.get("worker"): w.get("rank") for w in workers}
    late = {b.get("worker") for b in behind}
    rows = []
    for c in collectives:
        wid = c.get("worker")
        rows.append(
            {
                "group": c.get("group"),
                "rank": ranks.get(wid) if ranks.get(wid) is not None else c.get("rank"),
                "group_rank": c.get("rank"),
                "worker": wid,
                "last_enqueued": c.get("seq"),
                "last_started": c.get("started"),
                "last_completed": c.get("completed"),
                "op": _op_name(c.get("op")),
                "state": c.get("state"),
                "behind": wid in late,
            }
        )
    rows.sort(key=lambda r: (str(r["group"]), r["rank"] if isinstance(r["rank"], int) else 1 << 30))
    return rows
