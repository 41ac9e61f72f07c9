"""What the checks recognise in an `ast`: a compound statement's parts, the names a scope binds,
refs that come from task calls, values that look large, detached actors, debugger imports.
Pure functions over nodes."""

from __future__ import annotations

import ast

from raysleuth.lsp.remotes import is_task_call
from raysleuth.lsp.source import dotted

DEBUGGER_MODULES = {"pdb", "ipdb", "debugpy", "ray.util.pdb"}
"""`import pdb; pdb.set_trace()`: an import of these on the same line goes with the call."""
ARRAY_MODULES = {"np", "numpy", "torch", "pd", "pandas", "jnp", "jax", "cupy", "tf", "scipy", "pa", "pyarrow"}
_TRY_STAR = getattr(ast, "TryStar", ast.Try)
READERS = {"read", "read_bytes", "read_text", "load", "loads", "read_csv", "read_parquet", "read_json"}


def statement_header(stmt: ast.stmt) -> list[ast.expr] | None:
    """The expressions a compound statement evaluates itself; None for a simple statement."""
    if isinstance(stmt, ast.For | ast.AsyncFor):
        return [stmt.target, stmt.iter]
    if isinstance(stmt, ast.While | ast.If):
        return [stmt.test]
    if isinstance(stmt, ast.With | ast.AsyncWith):
        return [i.context_expr for i in stmt.items]
    if isinstance(stmt, ast.Match):
        return [stmt.subject]
    if isinstance(stmt, ast.Try | _TRY_STAR):
        return []
    return None


def blocks(stmt: ast.stmt) -> list[list[ast.stmt]]:
    out = [getattr(stmt, f) for f in ("body", "orelse", "finalbody") if getattr(stmt, f, None)]
    out += [h.body for h in getattr(stmt, "handlers", ())]
    out += [c.body for c in getattr(stmt, "cases", ())]
    return out


def scope_bindings(scope: ast.AST) -> dict[str, ast.AST]:
    """Name → the value last assigned to it directly in this scope (nested defs not entered)."""
    out: dict[str, ast.AST] = {}
    todo = list(getattr(scope, "body", []))
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out.setdefault(t.id, node.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            out.setdefault(node.target.id, node.value)
        elif not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            todo.extend(c for c in ast.iter_child_nodes(node) if isinstance(c, ast.stmt))
    return out


def names_from_tasks(scope: ast.AST) -> set[str]:
    """Names assigned (or appended to) from an expression that submits tasks, within `scope`."""
    out = set()
    for node in ast.walk(scope):
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign) and node.value is not None:
            if any(is_task_call(n) for n in ast.walk(node.value)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                out |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("append", "extend") and any(
                is_task_call(n) for a in node.args for n in ast.walk(a)
            ):
                if isinstance(node.func.value, ast.Name):
                    out.add(node.func.value.id)
    return out


def names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def looks_large(value: ast.AST | None) -> bool:
    """An expression that usually makes a big object: an array or frame, a comprehension, a
    file's contents, a repeated list."""
    if value is None:
        return False
    if isinstance(value, ast.ListComp | ast.DictComp | ast.SetComp):
        return True
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Mult):
        return isinstance(value.left, ast.List | ast.Tuple) or isinstance(value.right, ast.List | ast.Tuple)
    if isinstance(value, ast.Constant) and isinstance(value.value, str | bytes):
        return len(value.value) > 100_000
    if not isinstance(value, ast.Call):
        return False
    name = dotted(value.func) or ""
    if name == "ray.put":
        return False
    root = name.partition(".")[0]
    if root in ARRAY_MODULES and "." in name:
        return True
    if name in ("bytes", "bytearray", "list") and value.args:
        return True
    return isinstance(value.func, ast.Attribute) and value.func.attr in READERS


def detached(call: ast.Call) -> bool:
    """`A.options(name=..., lifetime="detached").remote()`: kept alive by name, on purpose."""
    node = getattr(call.func, "value", None)
    while isinstance(node, ast.Call | ast.Attribute):
        if isinstance(node, ast.Call) and any(k.arg == "lifetime" for k in node.keywords):
            return True
        node = node.func if isinstance(node, ast.Call) else node.value
    return False


def debugger_import(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.Import):
        return all(a.name in DEBUGGER_MODULES for a in stmt.names)
    return (
        isinstance(stmt, ast.ImportFrom)
        and f"{stmt.module}" in ("ray.util",)
        and all(a.name == "pdb" for a in stmt.names)
    )
