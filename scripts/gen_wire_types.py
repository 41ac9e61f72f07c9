"""Write extension/broker/wire.ts, the extension's types of the broker's objects, from the
Python model (raysleuth.model.worker, .crash, .wire): one definition, two languages.

`python scripts/gen_wire_types.py` rewrites the file; `--check` exits 1 when it is stale
(tests/python/unit/test_wire_types.py runs that).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import sys
import types
import typing
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python_backend"))

from raysleuth.model import case, crash, wire, worker  # noqa: E402

OUT = ROOT / "extension" / "broker" / "wire.ts"
HEADER = (
    "// Generated from python_backend/raysleuth/model by scripts/gen_wire_types.py: do not edit.\n"
    "// The broker's objects as docs/contract.md describes them; types only.\n"
)

ALIASES = {"WorkerState": wire.WorkerState, "CrashKind": wire.CrashKind, "CaseKind": wire.CaseKind}
"""Literal types written as named TypeScript unions."""

OBJECTS: list[tuple[str, type, tuple[str, ...] | None]] = [
    ("PausedAt", wire.PausedAt, None),
    ("GpuMemory", wire.GpuMemory, None),
    ("PauseDeadline", wire.PauseDeadline, None),
    ("WorkerBusy", wire.WorkerBusy, None),
    ("WorkerRole", wire.WorkerRole, None),
    ("Worker", worker.Worker, None),
    ("CrashWorker", wire.CrashWorker, None),
    ("CrashFrame", wire.CrashFrame, None),
    ("CrashSummary", wire.CrashSummary, None),
    ("CrashRecord", crash.CrashRecord, crash.CrashRecord.DETAIL),
    ("ArmedOn", wire.ArmedOn, None),
    ("PointJson", wire.PointJson, None),
    ("CaseSummary", case.Case, case.Case.LISTED),
]
"""(TypeScript name, Python class, the fields the wire carries: None for all of them)."""


def field_docs(cls: type) -> dict[str, str]:
    """`#:` comments by field: the line after a field (dataclasses) or before it (TypedDicts)."""
    src = inspect.getsource(cls).splitlines()
    node = ast.parse(inspect.cleandoc("\n".join(src)) if src[0].startswith(" ") else "\n".join(src))
    body = node.body[0]
    assert isinstance(body, ast.ClassDef)
    names = {
        n.lineno - 1: n.target.id
        for n in body.body
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
    }
    docs: dict[str, list[str]] = {}
    is_td = typing.is_typeddict(cls)
    for i, line in enumerate(src):
        text = line.strip()
        if not text.startswith("#:"):
            continue
        j = i
        while j in range(len(src)) and src[j].strip().startswith("#:"):
            j = j + 1 if is_td else j - 1
        if j in names:
            docs.setdefault(names[j], []).append(text[2:].strip())
    return {k: " ".join(v) for k, v in docs.items()}


def ts_type(tp: object) -> str:
    for name, alias in ALIASES.items():
        if tp == alias:
            return name
    if tp is type(None):
        return "null"
    if tp is str:
        return "string"
    if tp in (int, float):
        return "number"
    if tp is bool:
        return "boolean"
    if tp is typing.Any:
        return "unknown"
    if tp is list:
        return "unknown[]"
    if tp is dict:
        return "Record<string, unknown>"
    if isinstance(tp, type) and any(tp is c for _, c, _ in OBJECTS):
        return next(n for n, c, _ in OBJECTS if c is tp)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.NotRequired:
        return ts_type(args[0])
    if origin in (typing.Union, types.UnionType):
        parts = [ts_type(a) for a in args]
        return " | ".join(dict.fromkeys(p for p in parts if p != "null")) + (
            " | null" if "null" in parts else ""
        )
    if origin is typing.Literal:
        return " | ".join(f'"{a}"' for a in args)
    if origin is list:
        inner = ts_type(args[0])
        return f"({inner})[]" if "|" in inner else f"{inner}[]"
    if origin is dict:
        return f"Record<{ts_type(args[0])}, {ts_type(args[1])}>"
    raise TypeError(f"no TypeScript type for {tp!r}: add it to scripts/gen_wire_types.py")


def members(cls: type, only: tuple[str, ...] | None) -> list[tuple[str, object, bool]]:
    """(name, type, optional) in declaration order."""
    hints = typing.get_type_hints(cls, include_extras=True)
    if typing.is_typeddict(cls):
        names = list(cls.__annotations__)
        optional = set(getattr(cls, "__optional_keys__", ()))
        return [
            (n, hints[n], n in optional or typing.get_origin(hints[n]) is typing.NotRequired) for n in names
        ]
    fields = [f for f in dataclasses.fields(cls) if f.init and (only is None or f.name in only)]
    return [(f.name, hints[f.name], False) for f in fields]


def render() -> str:
    out = [HEADER]
    for name, alias in ALIASES.items():
        union = " | ".join(f'"{a}"' for a in typing.get_args(alias))
        out.append(f"export type {name} = {union};")
    for name, cls, only in OBJECTS:
        docs = field_docs(cls)
        out.append("")
        doc = inspect.getdoc(cls) if cls.__doc__ and not dataclasses.is_dataclass(cls) else None
        if doc:
            out.append(f"/** {' '.join(doc.split())} */")
        out.append(f"export interface {name} {{")
        for field, tp, optional in members(cls, only):
            if field in docs:
                out.append(f"  /** {docs[field]} */")
            out.append(f"  {field}{'?' if optional else ''}: {ts_type(tp)};")
        out.append("}")
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT.relative_to(ROOT)} is stale: run python scripts/gen_wire_types.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
