"""The parallel stack tree (issue 27): the main-thread stacks of a job's ranks merged outermost
first into one tree, as the parallel stack views of HPC debuggers show them. Each node is one
frame (function, file, line) with the ranks and workers standing in or below it; a node with
more than one child is where the ranks part (`branch`). Pure data: `GET /v1/stacks?tree=1`, the
CLI's `stacks --tree` and the tests build it from the same rows.
"""

from __future__ import annotations

from raysleuth.model.stacks import _job_order, _rank_key, main_thread, rank_ranges


def _node(frame: dict | None) -> dict:
    f = frame or {}
    return {
        "function": f.get("function") or "?",
        "path": f.get("path"),
        "line": f.get("line"),
        "ranks": [],
        "workers": [],
        "children": [],
        "branch": False,
    }


def _key(frame: dict) -> tuple:
    return (frame.get("path"), frame.get("line"), frame.get("function"))


def job_tree(workers: list[dict], job=None) -> dict:
    """One job's tree (rows of `GET /v1/stacks` whose main thread has frames). The root is the
    outermost frame they share, else a node named after the job that holds the roots."""
    rows = sorted((w for w in workers if main_thread(w)), key=_rank_key)
    paths = [list(reversed((main_thread(w) or {}).get("frames") or [])) for w in rows]
    outer = {_key(p[0]) for p in paths if p}
    if len(outer) == 1:
        root = _node(next(p[0] for p in paths if p))
        start = 1
    else:
        root = _node({"function": f"job {job}" if job else "all workers"})
        start = 0
    index: dict[int, dict[tuple, dict]] = {}
    for w, frames in zip(rows, paths, strict=True):
        rank, wid = w.get("rank"), w.get("worker")
        _add(root, rank, wid)
        node = root
        for frame in frames[start:]:
            children = index.setdefault(id(node), {})
            child = children.get(_key(frame))
            if child is None:
                child = children[_key(frame)] = _node(frame)
                node["children"].append(child)
            _add(child, rank, wid)
            node = child
    _finish(root)
    return root


def _add(node: dict, rank, wid) -> None:
    if isinstance(rank, int):
        node["ranks"].append(rank)
    node["workers"].append(wid)


def _finish(node: dict) -> None:
    node["ranks"] = sorted(set(node["ranks"]))
    node["branch"] = len(node["children"]) > 1
    node["children"].sort(key=lambda c: (c["ranks"][:1] or [1 << 30], c["function"]))
    for c in node["children"]:
        _finish(c)


def stack_trees(workers: list[dict]) -> list[dict]:
    """One tree per job, in the order the jobs come."""
    out = []
    for job in _job_order([w for w in workers if main_thread(w)]):
        tree = job_tree([w for w in workers if w.get("job_id") == job], job)
        out.append(dict(tree, job_id=job))
    return out


def format_tree(tree: dict, indent: str = "") -> list[str]:
    """The tree as text lines: `fit train.py:120  ranks 0-3 (4)`, a `<- ranks part` mark where it branches."""
    where = f" {str(tree.get('path') or '').rpartition('/')[2]}:{tree['line']}" if tree.get("line") else ""
    who = f"ranks {rank_ranges(tree['ranks'])}" if tree["ranks"] else "no rank"
    mark = "  <- ranks part here" if tree.get("branch") else ""
    lines = [f"{indent}{tree['function']}{where}  {who} ({len(tree['workers'])}){mark}"]
    for child in tree["children"]:
        lines += format_tree(child, indent + "  ")
    return lines
