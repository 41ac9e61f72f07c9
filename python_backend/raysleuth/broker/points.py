"""The cluster's breakpoints, logpoints and snapshot points, as the broker keeps them.

Breakpoints are set per file (`PUT /v1/breakpoints` replaces a file's set, as DAP's
setBreakpoints does); snapshot points are added one at a time and collect rows. Every change
goes to the registry actor as one list of specs, which each agent gets with its next heartbeat.
The set is saved in the state dir, so a broker restart re-arms what the user had.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
import time
from pathlib import Path

from raysleuth.errors import BadRequest, NotFound
from raysleuth.model.hits import HitCondition
from raysleuth.model.scope import Scope, split_condition, with_ranks

log = logging.getLogger(__name__)

MAX_SNAPSHOT_ROWS = 2000
"""Rows kept per snapshot point (ranks × captures)."""


def _abs_path(body: dict, field: str = "path") -> str:
    path = body.get(field)
    if not isinstance(path, str) or not path:
        raise BadRequest(f"'{field}' is missing", f'Send "{field}": "/abs/path/to/file.py".')
    if not os.path.isabs(path):
        raise BadRequest(
            f"'{field}' must be an absolute path, not {path!r}", "Send the file's absolute path."
        )
    return os.path.normpath(path)


def _line(value, what: str = "line") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BadRequest(f"'{what}' must be a positive integer, not {value!r}", f'Send "{what}": 12.')
    return value


def _check_condition(rest: str | None, condition: str) -> None:
    if rest is None:
        return
    try:
        compile(rest, "<condition>", "eval")
    except SyntaxError as exc:
        raise BadRequest(
            f"condition {condition!r} is not a Python expression: {exc.msg}",
            "Write a scope, then a Python expression: [rank 0] step % 100 == 0",
        ) from None


def _rel(path: str, root) -> str | None:
    """The path relative to the editor's workspace root: workers with their own copy match by it."""
    if not isinstance(root, str) or not root or not os.path.isabs(root):
        return None
    rel = os.path.relpath(path, os.path.normpath(root))
    return None if rel.startswith("..") else rel


def _point_id(prefix: str, *parts) -> str:
    digest = hashlib.sha1(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:10]
    return f"{prefix}-{digest}"


def parse_breakpoint(path: str, rel: str | None, bp: dict) -> dict:
    if not isinstance(bp, dict):
        raise BadRequest(f"a breakpoint must be an object, not {bp!r}", 'Send {"line": 12}.')
    line = _line(bp.get("line"))
    condition = bp.get("condition") or None
    if condition is not None and not isinstance(condition, str):
        raise BadRequest("'condition' must be a string", 'Send "condition": "[rank 0] step > 10".')
    scope, rest = split_condition(condition)
    _check_condition(rest, condition or "")
    scope = with_ranks(scope, bp.get("ranks"))
    hit = bp.get("hitCondition") or None
    if hit is not None:
        try:
            HitCondition(str(hit))
        except ValueError:
            raise BadRequest(
                f"hitCondition {hit!r} is not understood",
                "Write a number (5) or an operator and one: >5, >=5, %10.",
            ) from None
    msg = bp.get("logMessage") or None
    if msg is not None and not isinstance(msg, str):
        raise BadRequest("'logMessage' must be a string", 'Send "logMessage": "loss={loss}".')
    ranks = sorted(scope.ranks) if scope.ranks is not None else None
    return {
        "id": _point_id("bp", path, line, condition, hit, msg, ranks),
        "kind": "log" if msg else "break",
        "path": path,
        "rel": rel,
        "line": line,
        "condition": condition,
        "hitCondition": hit,
        "logMessage": msg,
        "ranks": ranks,
        "scope": scope.text(),
        "_scope": scope.to_json(),
        "_rest": rest,
    }


def agent_spec(p: dict) -> dict:
    """What an agent needs of a point: the condition without its scope, the scope parsed."""
    return {
        "id": p["id"],
        "kind": p["kind"],
        "path": p["path"],
        "rel": p.get("rel"),
        "line": p["line"],
        "condition": p.get("condition"),
        "rest": p.get("_rest"),
        "hitCondition": p.get("hitCondition"),
        "logMessage": p.get("logMessage"),
        "scope": p["_scope"],
        "count": p.get("count"),
        "snapshot": p.get("snapshot"),
    }


def public(p: dict, armed: int) -> dict:
    out = {k: v for k, v in p.items() if not k.startswith("_") and k not in ("kind", "rel")}
    out["armed"] = armed
    return out


class ClusterPoints:
    def __init__(self, state_dir: Path | None) -> None:
        self.files: dict[str, list[dict]] = {}
        """Path → that file's breakpoints, in line order."""
        self.snapshots: dict[str, dict] = {}
        """Snapshot id → its point, with its rows."""
        self._ids = itertools.count(1)
        self._file = Path(state_dir) / "breakpoints.json" if state_dir else None
        self._load()

    # --- breakpoints ----------------------------------------------------------------------

    def put_file(self, body: dict) -> list[dict]:
        if not isinstance(body, dict):
            raise BadRequest("the body must be a JSON object", 'Send {"path": ..., "breakpoints": [...]}.')
        path = _abs_path(body)
        bps = body.get("breakpoints")
        if not isinstance(bps, list):
            raise BadRequest(
                "'breakpoints' must be a list", 'Send "breakpoints": [{"line": 12}] (empty clears).'
            )
        rel = _rel(path, body.get("root"))
        parsed = [parse_breakpoint(path, rel, bp) for bp in bps]
        parsed.sort(key=lambda p: p["line"])
        if parsed:
            self.files[path] = parsed
        else:
            self.files.pop(path, None)
        self._save()
        return parsed

    def clear(self) -> None:
        self.files.clear()
        self._save()

    def breakpoints(self) -> list[dict]:
        return [p for path in sorted(self.files) for p in self.files[path]]

    # --- snapshot points ------------------------------------------------------------------

    def add_snapshot(self, body: dict) -> dict:
        if not isinstance(body, dict):
            raise BadRequest("the body must be a JSON object", 'Send {"path": ..., "line": 12}.')
        path = _abs_path(body)
        line = _line(body.get("line"))
        condition = body.get("condition") or None
        scope, rest = split_condition(condition)
        _check_condition(rest, condition or "")
        scope = with_ranks(scope, body.get("ranks"))
        count = body.get("count", 1)
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= 1000:
            raise BadRequest(f"'count' must be 1 to 1000, not {count!r}", "Captures per worker: 'count': 1.")
        sid = f"snap-{next(self._ids)}-{int(time.time()) % 100000}"
        snap = {
            "id": sid,
            "kind": "snapshot",
            "snapshot": sid,
            "path": path,
            "rel": _rel(path, body.get("root")),
            "line": line,
            "condition": condition,
            "hitCondition": None,
            "logMessage": None,
            "ranks": sorted(scope.ranks) if scope.ranks is not None else None,
            "scope": scope.text(),
            "count": count,
            "created": time.time(),
            "_scope": scope.to_json(),
            "_rest": rest,
            "_rows": [],
        }
        self.snapshots[sid] = snap
        return snap

    def snapshot(self, sid: str) -> dict:
        snap = self.snapshots.get(sid)
        if snap is None:
            raise NotFound(f"No snapshot point {sid}.", "List them with GET /v1/snapshots.")
        return snap

    def remove_snapshot(self, sid: str) -> None:
        self.snapshot(sid)
        del self.snapshots[sid]

    def add_row(self, sid: str, row: dict) -> bool:
        snap = self.snapshots.get(sid)
        if snap is None:
            return False
        if len(snap["_rows"]) < MAX_SNAPSHOT_ROWS:
            snap["_rows"].append(row)
        return True

    def snapshot_listing(self) -> list[dict]:
        return [
            dict(public(s, 0), rows=len(s["_rows"]))
            for s in sorted(self.snapshots.values(), key=lambda s: s["created"])
        ]

    # --- for the agents -------------------------------------------------------------------

    def agent_specs(self) -> list[dict]:
        return [agent_spec(p) for p in self.breakpoints()] + [agent_spec(s) for s in self.snapshots.values()]

    # --- persistence ----------------------------------------------------------------------

    def _save(self) -> None:
        if self._file is None:
            return
        try:
            tmp = self._file.with_suffix(".tmp")
            tmp.write_text(json.dumps({"files": self.files}, indent=1))
            os.replace(tmp, self._file)
        except OSError as exc:
            log.warning("saving breakpoints to %s failed: %s", self._file, exc)

    def _load(self) -> None:
        if self._file is None or not self._file.exists():
            return
        try:
            data = json.loads(self._file.read_text())
            self.files = {p: list(bps) for p, bps in (data.get("files") or {}).items() if bps}
        except (OSError, ValueError, AttributeError) as exc:
            log.warning("ignoring unreadable %s: %s", self._file, exc)
            self.files = {}


__all__ = ["ClusterPoints", "Scope"]
