"""The parallel stack tree (issue 27): the main-thread stacks of a job's ranks merged outermost
first into one tree, as the parallel stack views of HPC debuggers show them. Each node is one
frame (function, file, line) with the ranks and workers standing in or below it; a node with
more than one child is where the ranks part (`branch`). Pure data: `GET /v1/stacks?tree=1`, the
CLI's `stacks --tree` and the tests build it from the same rows.
"""

from __future__ import annotations

from raysleuth.model.frames import is_library, user_packages
from raysleuth.model.stacks import _called, _job_order, _rank_key, main_thread, rank_ranges


def _node(frame: dict | None, library: bool = False) -> dict:
    f = frame or {}
    return {
        "function": f.get("function") or "?",
        "path": f.get("path"),
        "line": f.get("line"),
        "ranks": [],
        "workers": [],
        "children": [],
        "branch": False,
        "library": library,
        "via": [],
    }


def _key(frame: dict) -> tuple:
    return (frame.get("path"), frame.get("line"), frame.get("function"))


def _bare(frame: dict) -> dict:
    return {k: frame.get(k) for k in ("function", "path", "line", "code") if frame.get(k) is not None}


_NONE: list[dict] = []
"""The `via` of a user frame called straight from the one before (shared, never appended to)."""


def _steps(frames: list[dict], known: dict) -> list[tuple[tuple, dict, list[dict]]]:
    """A worker's path through the tree, outermost first, as (key, frame, via) steps: one per
    frame of the user's, with the library frames between it and the user frame before it as its
    `via`; the library frames inside the innermost user frame (or a whole stack of library
    frames) as one last `library` step. Library frames never make a step of their own: ranks that
    part inside verl's wrappers part at the user frame that called them."""
    steps: list[tuple[tuple, dict, list[dict]]] = []
    via: list[dict] = _NONE  # a list made only for a library frame: most user frames have none
    for f in reversed(frames):
        path = f.get("path")
        lib = f.get("library")
        if lib is None:  # a row the broker did not mark: the rule, once per file
            lib = known.get(path)
            if lib is None:
                lib = known[path] = is_library(path, known["users"])
        if lib:
            if via is _NONE:
                via = [f]
            else:
                via.append(f)
            continue
        steps.append(((path, f.get("line"), f.get("function")), f, via))
        via = _NONE
    if via:
        steps.append((("library", *(_key(f) for f in via)), _last_call(via), via))  # never a user key
    return steps


def _last_call(via: list[dict]) -> dict:
    """The library function the user's code called (outermost first list): `all_reduce`, not
    the c10d logger's `wrapper` around it."""
    name = _called(list(reversed(via)))
    return next((f for f in via if str(f.get("function")) == name), via[0])


def job_tree(workers: list[dict], job=None) -> dict:
    """One job's tree (rows of `GET /v1/stacks` whose main thread has frames). The root is the
    outermost user frame they share, else a node named after the job that holds the roots.
    Library frames (`model/frames.py`) are folded: each user node keeps those between it and its
    parent in `via`, and what a worker runs inside its innermost user frame is one `library`
    leaf with its `frames`; so ranks part at a frame of the user's, never at a wrapper."""
    rows = sorted((w for w in workers if main_thread(w)), key=_rank_key)
    known: dict = {"users": user_packages()}
    paths = [_steps((main_thread(w) or {}).get("frames") or [], known) for w in rows]
    outer = {p[0][0] for p in paths if p}
    if len(outer) == 1:
        key0, seed, via = next(p[0] for p in paths if p)
        root = _seeded(key0, seed, via)
        start = 1
    else:
        root = _node({"function": f"job {job}" if job else "all workers"})
        start = 0
    index: dict[int, dict[tuple, dict]] = {}
    for w, steps in zip(rows, paths, strict=True):
        rank, wid = w.get("rank"), w.get("worker")
        _add(root, rank, wid)
        node = root
        for key, seed, via in steps[start:]:
            children = index.setdefault(id(node), {})
            child = children.get(key)
            if child is None:
                child = children[key] = _seeded(key, seed, via)
                node["children"].append(child)
            _add(child, rank, wid)
            node = child
    _finish(root)
    return root


def _seeded(key: tuple, frame: dict, via: list[dict]) -> dict:
    """A new node for a step: a user frame and its way in, or a leaf of library frames."""
    node = _node(frame, library=key[0] == "library" and isinstance(key[1], tuple))
    if node["library"]:
        node["frames"] = [_bare(f) for f in via]
    else:
        node["via"] = [_bare(f) for f in via]
    return node


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


def _where(f: dict) -> str:
    return (
        f" {str(f.get('path') or '').replace(chr(92), '/').rpartition('/')[2]}:{f['line']}"
        if f.get("line")
        else ""
    )


def _frames_text(n: int) -> str:
    return f"{n} library frame{'s' if n != 1 else ''}"


def format_tree(tree: dict, indent: str = "", all_frames: bool = False) -> list[str]:
    """The tree as text lines: `fit train.py:120  ranks 0-3 (4)`, a `<- ranks part` mark where it
    branches. Library frames folded (`via 3 library frames`, a leaf `[5 library frames]`), or
    each on a line of its own marked `(library)` with `all_frames`."""
    via = tree.get("via") or []
    lines = [f"{indent}{f.get('function')}{_where(f)}  (library)" for f in via] if all_frames else []
    who = f"ranks {rank_ranges(tree['ranks'])}" if tree["ranks"] else "no rank"
    mark = "  <- ranks part here" if tree.get("branch") else ""
    lib = tree.get("frames") or [] if tree.get("library") else []
    fold = (
        f"  [{_frames_text(len(lib))}]"
        if lib
        else f"  (via {_frames_text(len(via))})"
        if via and not all_frames
        else ""
    )
    lines.append(f"{indent}{tree['function']}{_where(tree)}  {who} ({len(tree['workers'])}){fold}{mark}")
    if all_frames:
        lines += [f"{indent}  {f.get('function')}{_where(f)}  (library)" for f in lib]
    for child in tree["children"]:
        lines += format_tree(child, indent + "  ", all_frames)
    return lines
