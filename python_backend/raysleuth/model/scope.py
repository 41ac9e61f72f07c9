"""Rank scopes of cluster breakpoints: `[rank 0,2-3]`, `[node 3f2a]`, `[actor Learner]`,
`[role critic]` (a verl role or worker group, model/roles.py), `[group stragglers]` (a rank group
of `GET /v1/groups`, a verl worker group among them, resolved by the broker when it hands the
point out).

A condition may start with one or more scopes (all must hold), followed by an ordinary Python
condition. A leading bracket whose first word is no scope kind is Python (`[x for x in xs] == []`)
when the text from there is a Python expression, else an unknown scope. The cases both this
parser and the extension's (extension/breakpoints/rankScope.ts) must agree on are one table:
tests/scope_cases.json. The broker parses and validates them; the agent matches them against its worker.
Loaded in every armed worker: standard library only.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

from raysleuth.model.expr import is_expression
from raysleuth.model.roles import names_of
from raysleuth.shared.errors import BadRequest

_SCOPE = re.compile(r"\s*\[\s*([A-Za-z_]+)\s*([^\]]*)\]")
KINDS = {
    "rank": "rank",
    "ranks": "rank",
    "node": "node",
    "nodes": "node",
    "actor": "actor",
    "actors": "actor",
    "group": "group",
    "groups": "group",
    "role": "role",
    "roles": "role",
}
MAX_RANK = 1 << 20


class Scope(NamedTuple):
    ranks: frozenset | None = None
    """Ranks that match; None: any rank."""
    nodes: tuple = ()
    """Node-id prefixes or node IPs; empty: any node."""
    actors: tuple = ()
    """Actor class names or actor names; empty: any actor or task."""
    first: bool = False
    """Rank 0 of each job only, and every worker without a rank (a plain task): what a plain
    editor breakpoint stops by default (`firstRank` in `PUT /v1/breakpoints`)."""
    groups: tuple = ()
    """Rank group names (any of them); empty: no group scope."""
    group_defs: tuple = ()
    """The named groups' definitions as the broker resolved them when it handed the point out
    (`{name, ranks, workers, expression, job_id}`, `missing: true` for a group that is gone);
    what an agent matches against. Empty in a point the broker has not resolved."""
    roles: tuple = ()
    """verl role names, role classes or worker groups (any of them); empty: any role."""

    def is_all(self) -> bool:
        return (
            self.ranks is None
            and not self.nodes
            and not self.actors
            and not self.first
            and not self.groups
            and not self.roles
        )

    def text(self) -> str | None:
        """The scope as written in a condition, without brackets: `rank 0,2-3`; None for all."""
        parts = []
        if self.ranks is not None:
            parts.append("rank " + format_ranks(self.ranks))
        if self.nodes:
            parts.append("node " + ",".join(self.nodes))
        if self.actors:
            parts.append("actor " + ",".join(self.actors))
        if self.roles:
            parts.append("role " + ",".join(self.roles))
        if self.groups:
            parts.append("group " + ",".join(self.groups))
        if self.first:
            parts.append("first rank")
        return "; ".join(parts) if parts else None

    def to_json(self) -> dict:
        return {
            "ranks": sorted(self.ranks) if self.ranks is not None else None,
            "nodes": list(self.nodes),
            "actors": list(self.actors),
            "first": self.first,
            "groups": list(self.groups),
            "group_defs": list(self.group_defs),
            "roles": list(self.roles),
        }

    @classmethod
    def from_json(cls, data: dict | None) -> Scope:
        data = data or {}
        ranks = data.get("ranks")
        return cls(
            frozenset(ranks) if ranks is not None else None,
            tuple(data.get("nodes") or ()),
            tuple(data.get("actors") or ()),
            bool(data.get("first")),
            tuple(data.get("groups") or ()),
            tuple(d for d in data.get("group_defs") or () if isinstance(d, dict)),
            tuple(data.get("roles") or ()),
        )

    def match(self, worker) -> bool | None:
        """True or False for this worker (a Worker or an identity dict); None while its rank is
        unknown and could still match, or while a worker hosting several verl roles runs
        another role's code than the scope's (`role`: the role running now, where known)."""
        get = worker.get if isinstance(worker, dict) else (lambda k: getattr(worker, k, None))
        if self.nodes:
            node_id = str(get("node_id") or "")
            node_ip = str(get("node_ip") or "")
            if not any(node_id.startswith(n) or node_ip == n for n in self.nodes):
                return False
        not_now = False
        if self.actors:
            names = {get("actor_class"), get("actor_name")}
            if not names.intersection(self.actors):
                held = _role_held(self.actors, get, classes_only=True)
                if held is False:
                    return False
                not_now = held is None
        if self.roles:
            held = _role_held(self.roles, get, classes_only=False)
            if held is False:
                return False
            not_now = not_now or held is None
        in_group: bool | None = True
        if self.groups:
            in_group = _in_any_group(self.group_defs, get)
            if in_group is False:
                return False
        if self.ranks is not None:
            rank = get("rank")
            if rank is None:
                return None
            out = rank in self.ranks and in_group
        elif self.first:
            rank = get("rank")
            out = (rank is None or rank == 0) and in_group
        else:
            out = in_group
        return None if out and not_now else out


def _role_held(wanted: tuple, get, classes_only: bool) -> bool | None:
    """Whether a worker hosts one of `wanted` (role classes; or role names, role classes and its
    worker group): True, False, or None when it does but the role running now is another."""
    hosted = [r for r in get("roles") or () if isinstance(r, dict)]
    wanted_set = set(wanted)
    if not classes_only and get("worker_group") in wanted_set:
        return True
    names = {r.get("class_name") for r in hosted} - {None} if classes_only else names_of(hosted)
    if not names & wanted_set:
        return False
    now = get("role")
    if now is None or len(hosted) < 2:
        return True
    current = [r for r in hosted if r.get("name") == now]
    now_names = {r.get("class_name") for r in current} if classes_only else names_of(current)
    return True if now_names & wanted_set else None


def parse_ranks(text: str) -> frozenset:
    """`0,2-3` → {0, 2, 3}."""
    out: set[int] = set()
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            a = int(lo)
            b = int(hi) if sep else a
        except ValueError:
            raise BadRequest(
                f"{text!r} is not a list of ranks", "Write ranks like 0 or 0,2-3 (numbers and ranges)."
            ) from None
        if a < 0 or b < a or b - a > MAX_RANK:
            raise BadRequest(f"rank range {part!r} is empty or negative", "Write a range low-high, like 2-5.")
        out.update(range(a, b + 1))
    if not out:
        raise BadRequest(f"{text!r} names no rank", "Write ranks like 0 or 0,2-3.")
    return frozenset(out)


def format_ranks(ranks) -> str:
    """{0, 2, 3} → `0,2-3`."""
    items = sorted(ranks)
    runs: list[str] = []
    i = 0
    while i < len(items):
        j = i
        while j + 1 < len(items) and items[j + 1] == items[j] + 1:
            j += 1
        runs.append(str(items[i]) if i == j else f"{items[i]}-{items[j]}")
        i = j + 1
    return ",".join(runs)


def split_condition(condition: str | None) -> tuple[Scope, str | None]:
    """`[rank 0] step % 100 == 0` → (Scope(ranks={0}), "step % 100 == 0")."""
    text = condition or ""
    ranks: frozenset | None = None
    nodes: list[str] = []
    actors: list[str] = []
    groups: list[str] = []
    roles: list[str] = []
    pos = 0
    while True:
        m = _SCOPE.match(text, pos)
        if m is None:
            break
        kind = KINDS.get(m.group(1).lower())
        if kind is None:
            if _is_python(text[pos:]):
                break  # `[x for x in xs] == []`: a bracket that is no scope starts the Python part
            raise BadRequest(
                f"unknown scope [{m.group(1)} …] in condition {condition!r}",
                "A scope is [rank 0,2-3], [node <id prefix or IP>], [actor <class or name>],"
                " [role <verl role or worker group>] or [group <name>].",
            )
        arg = m.group(2).strip()
        if not arg:
            raise BadRequest(f"scope [{m.group(1)}] names nothing", f"Write it like [{kind} …] with a value.")
        if kind == "rank":
            r = parse_ranks(arg)
            ranks = r if ranks is None else ranks & r
        elif kind == "node":
            nodes.extend(x.strip() for x in arg.split(",") if x.strip())
        elif kind == "group":
            for name in (x.strip() for x in arg.split(",") if x.strip()):
                if not _GROUP_NAME.match(name):
                    raise BadRequest(
                        f"group name {name!r} in condition {condition!r} is not a name",
                        "Letters, digits, _ . : -, up to 64: [group stragglers].",
                    )
                if name not in groups:
                    groups.append(name)
        elif kind == "role":
            for name in (x.strip() for x in arg.split(",") if x.strip()):
                if name not in roles:
                    roles.append(name)
        else:
            actors.extend(x.strip() for x in arg.split(",") if x.strip())
        pos = m.end()
    rest = text[pos:].strip() or None
    return Scope(ranks, tuple(nodes), tuple(actors), groups=tuple(groups), roles=tuple(roles)), rest


_GROUP_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,63}$")


def _in_any_group(defs: tuple, get) -> bool | None:
    """Whether the worker is in one of the resolved groups: True, False, or None while its rank
    is unknown and a group by ranks or expression could still take it."""
    unknown = False
    for g in defs:
        if g.get("missing"):
            continue
        if g.get("job_id"):
            job = get("job_id")
            if not job:
                unknown = True  # not known yet (a worker Ray started before its job): may match
                continue
            if str(job) != g["job_id"]:
                continue
        if g.get("worker_group"):  # a verl worker group or role (broker/groups/book.py)
            held = _role_held((g["worker_group"],), get, classes_only=False)
            if held is True:
                return True
            unknown = unknown or held is None  # it hosts that role but runs another now
            continue
        if g.get("ranks") is not None:
            rank = get("rank")
            if rank is None:
                unknown = True
            elif rank in g["ranks"]:
                return True
        elif g.get("workers") is not None:
            wid = str(get("id") or "")
            if wid and any(wid.startswith(i) for i in g["workers"]):
                return True
        elif g.get("expression"):
            hit = _expression_holds(g["expression"], get)
            if hit is None:
                unknown = True
            elif hit:
                return True
        else:
            return True  # `all` or `job-<id>`: every worker (of that job)
    return None if unknown else False


@functools.lru_cache(maxsize=64)
def _compiled(text: str):
    from raysleuth.model.groups import compile_expression

    try:
        return compile_expression(text)
    except BadRequest:
        return None


def _expression_holds(text: str, get) -> bool | None:
    from raysleuth.model.groups import FIELDS

    code = _compiled(text)
    if code is None:
        return False
    values = {f: get(f) for f in FIELDS}
    try:
        return bool(eval(code, {"__builtins__": {}}, values))  # noqa: S307 - only fields, constants, arithmetic
    except (TypeError, ArithmeticError, ValueError):
        return None if values.get("rank") is None else False


def _is_python(text: str) -> bool:
    return is_expression(text)


def with_ranks(scope: Scope, ranks) -> Scope:
    """Narrow a scope by a breakpoint's `ranks` field (absent: unchanged)."""
    if ranks is None:
        return scope
    if not isinstance(ranks, (list, tuple)) or not all(
        isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in ranks
    ):
        raise BadRequest(f"ranks {ranks!r} is not a list of ranks (integers >= 0)", 'Send "ranks": [0, 3].')
    r = frozenset(ranks)
    return scope._replace(ranks=r if scope.ranks is None else scope.ranks & r)
