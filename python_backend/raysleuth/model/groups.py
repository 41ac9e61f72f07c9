"""Rank groups (issue 27): named sets of workers the editor and the CLI act on together, as
process groups in HPC debuggers. A group is ranks, worker ids, or an expression over a worker's
fields (`rank % 8 == 0`, `node_ip == "10.0.0.5"`), optionally for one job; `all` and one group
per job (`job-<id>`) always exist, and so does one per verl worker group and role the live
workers carry (issue 38: `critic`, whose ranks are that group's 0..N-1). Pure: membership is
computed from the worker table.
"""

from __future__ import annotations

import ast
import re

from raysleuth.model.roles import names_of
from raysleuth.model.worker import Worker
from raysleuth.shared.errors import BadRequest

NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,63}$")
MAX_EXPRESSION = 500
FIELDS = (
    "rank",
    "local_rank",
    "world_size",
    "pid",
    "node_id",
    "node_ip",
    "job_id",
    "actor_class",
    "actor_name",
    "task",
    "state",
    "worker_group",
    "role",
)
_ALLOWED = (
    ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub, ast.BinOp, ast.Add,
    ast.Sub, ast.Mult, ast.Mod, ast.FloorDiv, ast.Compare, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt,
    ast.GtE, ast.In, ast.NotIn, ast.Is, ast.IsNot, ast.Name, ast.Load, ast.Constant, ast.Tuple, ast.List,
)  # fmt: skip


def check_name(name: str) -> str:
    if not isinstance(name, str) or not NAME.match(name):
        raise BadRequest(
            f"group name {name!r} is not a name", "Letters, digits, _ . : -, up to 64: stragglers."
        )
    if name == "all" or name.startswith("job-"):
        raise BadRequest(
            f"{name!r} is a built-in group", "Choose another name; `all` and job-<id> always exist."
        )
    return name


def compile_expression(text: str):
    """An expression over a worker's fields: only names of FIELDS, constants, arithmetic and
    comparisons (no calls, no attributes); BadRequest with a hint otherwise."""
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_EXPRESSION:
        raise BadRequest("'expression' must be a short expression", 'Send "expression": "rank % 8 == 0".')
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise BadRequest(f"{text[:80]!r} is not a Python expression", 'Like "rank % 8 == 0".') from None
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED):
            raise BadRequest(
                f"{type(node).__name__} is not allowed in a group expression",
                f"Use the worker's fields ({', '.join(FIELDS)}), numbers, strings, arithmetic, comparisons.",
            )
        if isinstance(node, ast.Name) and node.id not in FIELDS:
            raise BadRequest(f"unknown field {node.id!r}", f"The fields: {', '.join(FIELDS)}.")
    return compile(tree, "<group>", "eval")


def parse_group(name: str, body: dict) -> dict:
    """`PUT /v1/groups/{name}`'s body as the stored group."""
    check_name(name)
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object", 'Send {"ranks": [0, 8, 16]}.')
    given = [k for k in ("ranks", "workers", "expression") if body.get(k) is not None]
    if len(given) != 1:
        raise BadRequest(
            "a group is one of 'ranks', 'workers' or 'expression'", 'Send {"expression": "rank % 8 == 0"}.'
        )
    ranks, workers, expression = body.get("ranks"), body.get("workers"), body.get("expression")
    if ranks is not None and (
        not isinstance(ranks, list)
        or not all(isinstance(r, int) and not isinstance(r, bool) and r >= 0 for r in ranks)
    ):
        raise BadRequest("'ranks' must be a list of ranks", 'Send "ranks": [0, 3].')
    if workers is not None and (
        not isinstance(workers, list) or not all(isinstance(w, str) and w for w in workers)
    ):
        raise BadRequest("'workers' must be a list of worker ids", 'Send "workers": ["3f2a..."].')
    if expression is not None:
        compile_expression(expression)
    job = body.get("job_id")
    if job is not None and not isinstance(job, str):
        raise BadRequest("'job_id' must be a job id", 'Send "job_id": "01000000".')
    return {
        "name": name,
        "ranks": sorted(set(ranks)) if ranks else None,
        "workers": workers,
        "expression": expression,
        "job_id": job,
    }


def members(group: dict, workers: list[Worker]) -> list[Worker]:
    """The live workers of a group now."""
    live = [w for w in workers if w.live and (group.get("job_id") is None or w.job_id == group["job_id"])]
    if group.get("ranks") is not None:
        wanted = set(group["ranks"])
        return [w for w in live if w.rank in wanted]
    if group.get("workers") is not None:
        return [w for w in live if any(w.id.startswith(i) for i in group["workers"])]
    if group.get("worker_group"):
        return [w for w in live if group["worker_group"] in worker_group_names(w)]
    if group.get("expression"):
        code = compile_expression(group["expression"])
        out = []
        for w in live:
            try:
                if eval(code, {"__builtins__": {}}, {f: getattr(w, f) for f in FIELDS}):  # noqa: S307 - checked above
                    out.append(w)
            except (TypeError, ArithmeticError, ValueError):  # `rank % 8` of a worker without a rank
                continue  # that worker is not a member
        return out
    return live


def worker_group_names(w: Worker) -> set[str]:
    """The names `[group X]` finds a worker by as a verl worker: its worker group (verl's name
    prefix), its roles' names and classes."""
    out = names_of(w.roles)
    if w.worker_group:
        out.add(w.worker_group)
    return out


def worker_group(name: str) -> dict:
    """The built-in group of a verl worker group or role `name` (any job)."""
    return {"name": name, "ranks": None, "workers": None, "expression": None, "job_id": None,
            "worker_group": name}  # fmt: skip


def builtin_groups(workers: list[Worker]) -> list[dict]:
    """`all`, one per job of the live workers, and one per verl worker group and role name."""
    live = [w for w in workers if w.live]
    jobs = sorted({w.job_id for w in live if w.job_id})
    listed = {n for w in live for n in [w.worker_group, *(r.get("name") for r in w.roles)] if n}
    wgs = sorted(n for n in listed if NAME.match(n) and n != "all" and not n.startswith("job-"))
    return (
        [{"name": "all", "ranks": None, "workers": None, "expression": None, "job_id": None}]
        + [
            {"name": f"job-{j}", "ranks": None, "workers": None, "expression": None, "job_id": j}
            for j in jobs
        ]
        + [worker_group(n) for n in wgs]
    )
