"""A cluster point (breakpoint, logpoint or snapshot point) as broker, agent and CLI see it.

Parsed and validated once, at the edge where it comes in (an HTTP body, a saved file, a spec from
the registry); inside the code it is a `Point`, on the wire JSON. Loaded in every armed worker:
standard library only.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from dataclasses import dataclass, field

from raysleuth.model.expr import check_expression
from raysleuth.model.hits import HitCondition
from raysleuth.model.scope import Scope, split_condition, with_ranks
from raysleuth.model.wire import PointJson
from raysleuth.shared.errors import BadRequest
from raysleuth.shared.limits import MAX_LOG_MESSAGE_CHARS

DEFAULT_OWNER = "api"
"""Owner of points set by an HTTP client that does not name itself."""

MAX_OWNER = 64


@dataclass
class Point:
    id: str
    #: Stable id, a digest of what the point is (so the same point set twice keeps its id).
    kind: str
    #: "break", "log" (a logpoint) or "snapshot".
    path: str
    #: Absolute, normalized path of the file on the editor's host.
    line: int
    #: 1-based line.
    condition: str | None = None
    #: The condition as the user wrote it, scope included: `[rank 0] step % 100 == 0`.
    hit_condition: str | None = None
    #: DAP hitCondition text (`5`, `>5`, `%10`); JSON `hitCondition`.
    log_message: str | None = None
    #: Logpoint text with `{expr}` parts; JSON `logMessage`.
    scope: Scope = field(default_factory=Scope)
    #: Which workers are armed at all: the condition's scope narrowed by the request's `ranks`.
    rest: str | None = None
    #: The condition without its scope: what is evaluated in the frame.
    rel: str | None = None
    #: The path relative to the editor's workspace root: a worker with its own copy matches by it.
    owner: str = DEFAULT_OWNER
    #: Who set it: `cli`, `vscode:<window>`, an HTTP client's name; a PUT replaces only its own.
    count: int | None = None
    #: Snapshot points: captures per worker.
    snapshot: str | None = None
    #: Snapshot points: the snapshot id rows are filed under.
    created: float | None = None
    #: Snapshot points: when it was added (listing order).
    expressions: list[str] | None = None
    #: Snapshot points: expressions evaluated in the frame, each recorded as a summary (tensors)
    #: or a short repr, compared across ranks (issue 14).
    watch: dict | None = None
    #: Divergence watches (issue 26): {"step": the local that numbers passes, or None}; the
    #: agent then sends each pass's count (and that local) and no frames.
    hit: HitCondition | None = field(default=None, init=False, repr=False, compare=False)
    #: `hit_condition`, parsed.

    def __post_init__(self) -> None:
        self.hit = HitCondition(self.hit_condition) if self.hit_condition else None
        if self.log_message and self.kind == "break":
            self.kind = "log"

    @property
    def ranks(self) -> list[int] | None:
        return sorted(self.scope.ranks) if self.scope.ranks is not None else None

    # --- wire ----------------------------------------------------------------------------------

    def to_json(self, armed: int | None = None) -> PointJson:
        """The public listing (GET /v1/breakpoints, /v1/snapshots)."""
        out: PointJson = {
            "id": self.id,
            "path": self.path,
            "line": self.line,
            "condition": self.condition,
            "hitCondition": self.hit_condition,
            "logMessage": self.log_message,
            "ranks": self.ranks,
            "scope": self.scope.text(),
            "owner": self.owner,
        }
        if self.kind == "snapshot":
            out["snapshot"], out["count"] = self.snapshot, self.count
            out["created"], out["expressions"] = self.created, self.expressions
        if armed is not None:
            out["armed"] = armed
        return out

    def to_spec(self) -> dict:
        """Everything, for the agents (through the registry and Ray's KV) and the saved set."""
        return {
            "id": self.id,
            "kind": self.kind,
            "path": self.path,
            "rel": self.rel,
            "line": self.line,
            "condition": self.condition,
            "rest": self.rest,
            "hitCondition": self.hit_condition,
            "logMessage": self.log_message,
            "scope": self.scope.to_json(),
            "owner": self.owner,
            "count": self.count,
            "snapshot": self.snapshot,
            "created": self.created,
            "expressions": self.expressions,
            "watch": self.watch,
        }

    @classmethod
    def from_spec(cls, d: dict) -> Point:
        """A spec made by `to_spec` (a worker takes its points this way); raises on a bad one."""
        return cls(
            id=d["id"],
            kind=d.get("kind") or "break",
            path=os.path.normpath(d["path"]),
            line=int(d["line"]),
            condition=d.get("condition"),
            hit_condition=d.get("hitCondition"),
            log_message=d.get("logMessage"),
            scope=Scope.from_json(d.get("scope")),
            rest=d.get("rest"),
            rel=d.get("rel"),
            owner=d.get("owner") or DEFAULT_OWNER,
            count=d.get("count"),
            snapshot=d.get("snapshot"),
            created=d.get("created"),
            expressions=d.get("expressions") or None,
            watch=d.get("watch") if isinstance(d.get("watch"), dict) else None,
        )

    def replace(self, **changes) -> Point:
        return dataclasses.replace(self, **changes)

    # --- requests ------------------------------------------------------------------------------

    @classmethod
    def parse_breakpoint(cls, path: str, bp: dict, *, root=None, owner: str = DEFAULT_OWNER) -> Point:
        """One entry of `PUT /v1/breakpoints`'s `breakpoints` list; BadRequest with a hint if bad."""
        if not isinstance(bp, dict):
            raise BadRequest(f"a breakpoint must be an object, not {bp!r}", 'Send {"line": 12}.')
        line = parse_line(bp.get("line"))
        condition = _optional_str(bp, "condition", '"condition": "[rank 0] step > 10"')
        scope, rest = split_condition(condition)
        check_condition(rest, condition or "")
        scope = with_ranks(scope, bp.get("ranks"))
        first = bp.get("firstRank", False)
        if not isinstance(first, bool):
            raise BadRequest(f"firstRank {first!r} is not true or false", 'Send "firstRank": true.')
        if first and scope.ranks is None and not bp.get("logMessage"):
            scope = scope._replace(first=True)
        hit = bp.get("hitCondition") or None
        if hit is not None:
            try:
                HitCondition(str(hit))
            except ValueError:
                raise BadRequest(
                    f"hitCondition {hit!r} is not understood",
                    "Write a number (5) or an operator and one: >5, >=5, %10.",
                ) from None
            hit = str(hit)
        msg = _optional_str(bp, "logMessage", '"logMessage": "loss={loss}"')
        check_log_message(msg)
        ranks = sorted(scope.ranks) if scope.ranks is not None else None
        return cls(
            id=point_id(
                "bp", owner, path, line, condition, hit, msg, ranks, *(["first"] if scope.first else [])
            ),
            kind="log" if msg else "break",
            path=path,
            line=line,
            condition=condition,
            hit_condition=hit,
            log_message=msg,
            scope=scope,
            rest=rest,
            rel=relative_to(path, root),
            owner=owner,
        )

    @classmethod
    def parse_snapshot(cls, body: dict, sid: str, now: float, owner: str = DEFAULT_OWNER) -> Point:
        """`POST /v1/snapshots`'s body: {path, line, condition?, ranks?, count?, expressions?}."""
        path = parse_path(body)
        line = parse_line(body.get("line"))
        condition = _optional_str(body, "condition", '"condition": "[rank 0] step > 10"')
        scope, rest = split_condition(condition)
        check_condition(rest, condition or "")
        scope = with_ranks(scope, body.get("ranks"))
        count = body.get("count", 1)
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= 1000:
            raise BadRequest(f"'count' must be 1 to 1000, not {count!r}", "Captures per worker: 'count': 1.")
        return cls(
            id=sid,
            kind="snapshot",
            path=path,
            line=line,
            condition=condition,
            scope=scope,
            rest=rest,
            rel=relative_to(path, body.get("root")),
            owner=owner,
            count=count,
            snapshot=sid,
            created=now,
            expressions=parse_expressions(body.get("expressions")),
        )


def parse_watch(body: dict, wid: str, now: float) -> Point:
    """`POST /v1/watches`'s body as the snapshot point that carries the watch: every pass (or
    every `every`-th) of each rank in scope sends its expressions' summaries, without frames."""
    if not isinstance(body, dict):
        raise BadRequest(
            "the body must be a JSON object", 'Send {"path": ..., "line": 12, "expressions": ["loss"]}.'
        )
    if not body.get("expressions"):
        raise BadRequest("a watch needs 'expressions'", 'Send "expressions": ["grad"].')
    every = body.get("every", 1)
    if isinstance(every, bool) or not isinstance(every, int) or not 1 <= every <= 1_000_000:
        raise BadRequest(
            f"'every' must be a whole number from 1, not {every!r}", 'Every 10th pass: "every": 10.'
        )
    step = body.get("step")
    if step is not None and (not isinstance(step, str) or not step.isidentifier()):
        raise BadRequest(
            f"'step' must name a local variable, not {step!r}", 'Line ranks up by a local: "step": "step".'
        )
    snap = Point.parse_snapshot(
        {k: body.get(k) for k in ("path", "line", "condition", "ranks", "expressions", "root")}, wid, now
    )
    return snap.replace(count=0, watch={"step": step}, hit_condition=f"%{every}" if every > 1 else None)


MAX_EXPRESSIONS = 20


def parse_expressions(value) -> list[str] | None:
    """A snapshot's `expressions`: a list of Python expressions (each must compile)."""
    if value is None:
        return None
    if (
        not isinstance(value, list)
        or not all(isinstance(e, str) and e.strip() for e in value)
        or not 1 <= len(value) <= MAX_EXPRESSIONS
    ):
        raise BadRequest(
            f"'expressions' must be a list of 1 to {MAX_EXPRESSIONS} expressions, not {value!r}",
            'Send "expressions": ["self.model.fc.weight.grad", "loss"].',
        )
    for e in value:
        check_expression(e, f"the expression {e[:80]!r}", "Send one expression each.")
    return [e.strip() for e in value]


def parse_owner(value) -> str:
    """A PUT's `owner`: a short string; absent means `api`."""
    if value is None or value == "":
        return DEFAULT_OWNER
    if not isinstance(value, str) or len(value) > MAX_OWNER or not value.isprintable():
        raise BadRequest(
            f"'owner' must be a short printable string (at most {MAX_OWNER} characters), not {value!r}",
            'Name the client that sets the points: "owner": "my-script".',
        )
    return value


def parse_path(body: dict, name: str = "path") -> str:
    path = body.get(name)
    if not isinstance(path, str) or not path:
        raise BadRequest(f"'{name}' is missing", f'Send "{name}": "/abs/path/to/file.py".')
    if not os.path.isabs(path):
        raise BadRequest(f"'{name}' must be an absolute path, not {path!r}", "Send the file's absolute path.")
    return os.path.normpath(path)


def parse_line(value, what: str = "line") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BadRequest(f"'{what}' must be a positive integer, not {value!r}", f'Send "{what}": 12.')
    return value


def check_condition(rest: str | None, condition: str) -> None:
    """The Python part of a condition must compile (it is evaluated in the worker's frame)."""
    if rest is None:
        return
    check_expression(
        rest,
        f"condition {condition[:80]!r}",
        "Write a scope, then a Python expression: [rank 0] step % 100 == 0",
    )


def relative_to(path: str, root) -> str | None:
    """`path` relative to the editor's workspace root, or None when it lies outside or no root."""
    if not isinstance(root, str) or not root or not os.path.isabs(root):
        return None
    rel = os.path.relpath(path, os.path.normpath(root))
    return None if rel.startswith("..") else rel


def point_id(prefix: str, *parts) -> str:
    digest = hashlib.sha1(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:10]
    return f"{prefix}-{digest}"


def log_expressions(msg: str) -> list[str]:
    """The `{expression}` parts of a logpoint's text."""
    return re.findall(r"\{([^{}]*)\}", msg)


def check_log_message(msg: str | None) -> None:
    """A logpoint's text: bounded, and each `{expression}` in it a bounded Python expression."""
    if msg is None:
        return
    if len(msg) > MAX_LOG_MESSAGE_CHARS:
        raise BadRequest(
            f"logMessage is {len(msg)} characters long; at most {MAX_LOG_MESSAGE_CHARS} are allowed",
            "Log the values, not a text: 'loss={loss}' (the broker's RAYSLEUTH_MAX_LOG_MESSAGE_CHARS"
            " sets the bound).",
        )
    for part in log_expressions(msg):
        # within the bounds; one that does not parse is logged as its SyntaxError, as in VS Code
        check_expression(part, f"{{{part[:60]}}} in logMessage", 'Write "loss={loss}".', syntax=False)


def _optional_str(body: dict, name: str, example: str) -> str | None:
    value = body.get(name) or None
    if value is not None and not isinstance(value, str):
        raise BadRequest(f"'{name}' must be a string", f"Send {example}.")
    return value
