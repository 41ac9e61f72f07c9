"""Which functions and classes of a file run on Ray: `@ray.remote`, `ray.remote(cls)`, and any
class the workspace hands to `ray.remote` elsewhere (Ray Train- or Verl-style worker groups).

Pure `ast` work over one tree; the workspace scan reads files but never imports them.
"""

from __future__ import annotations

import ast
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from raysleuth.lsp.source import Source, Span, dotted

log = logging.getLogger(__name__)

SKIP_DIRS = {".git", ".venv", "venv", "node_modules", "__pycache__", ".cache", "dist", "build", ".tox"}
"""Folders the workspace scan never enters."""
MAX_SCAN_FILES = 5000
"""A workspace scan reads at most this many Python files."""


@dataclass(frozen=True)
class RemoteDef:
    """A function or class whose calls run as Ray tasks or actors."""

    name: str
    #: The def's name: matched to a worker's actor_class (actors) or task name (functions).
    kind: str
    #: "actor" (a class) or "function".
    span: Span
    #: From the first decorator to the end of the `def`/`class` line: where the lens goes.
    name_span: Span
    #: The name after `def`/`class`: where a hover answers.
    how: str
    #: "decorator", "ray.remote(...)" (in this file) or "workspace" (handed to ray.remote elsewhere).


def is_ray_remote(node: ast.AST, remote_names: frozenset[str]) -> bool:
    """`ray.remote`, `ray.remote(...)`, or `remote`/`remote(...)` imported from ray."""
    if isinstance(node, ast.Call):
        node = node.func
    name = dotted(node)
    return name == "ray.remote" or (name is not None and name in remote_names)


def is_task_call(node: ast.AST) -> bool:
    """A call that submits a task or actor call: `f.remote(...)`, `A.options(...).remote()`,
    `actor.method.remote(...)` (but not `ray.remote(...)`, which makes a remote object)."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "remote"
        and dotted(node.func) != "ray.remote"
    )


def remote_aliases(tree: ast.Module) -> frozenset[str]:
    """Names that mean `ray.remote` in this module (`from ray import remote [as r]`)."""
    out: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "ray":
            out.update(a.asname or a.name for a in node.names if a.name == "remote")
    return frozenset(out)


def handed_to_remote(tree: ast.AST, remote_names: frozenset[str] = frozenset()) -> set[str]:
    """Names passed to `ray.remote(X)` / `ray.remote(**opts)(X)` anywhere in the tree (the last
    part of a dotted name: `ray.remote(workers.Learner)` gives `Learner`)."""
    out = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        if is_ray_remote(node.func, remote_names) and not isinstance(node.func, ast.Call):
            target = node.args[0]
        elif isinstance(node.func, ast.Call) and is_ray_remote(node.func.func, remote_names):
            target = node.args[0]  # ray.remote(num_gpus=1)(Learner)
        else:
            continue
        name = dotted(target)
        if name:
            out.add(name.rpartition(".")[2])
    return out


def find_remote_defs(
    tree: ast.Module,
    src: Source,
    workspace_names: frozenset[str] = frozenset(),
    here: frozenset[str] | None = None,
    aliases: frozenset[str] | None = None,
) -> list:
    """Every remote function and actor class defined in this module, in source order. `here`
    and `aliases`: the names the module hands to ray.remote and its names for ray.remote, when
    the caller knows them (a chunk of a module does not see the rest)."""
    if aliases is None:
        aliases = remote_aliases(tree)
    if here is None:
        here = frozenset(handed_to_remote(tree, aliases))
    out: list[RemoteDef] = []
    for node in iter_statements(tree.body):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        if any(is_ray_remote(d, aliases) for d in node.decorator_list):
            how = "decorator"
        elif node.name in here:
            how = "ray.remote(...)"
        elif isinstance(node, ast.ClassDef) and node.name in workspace_names:
            how = "workspace"
        else:
            continue
        out.append(_remote_def(node, src, how))
    return sorted(out, key=lambda d: (d.span.line, d.span.col))


def iter_statements(body: list[ast.stmt]):
    """Every statement under `body`, nested blocks included, in source order; no expressions."""
    stack = list(reversed(body))
    while stack:
        stmt = stack.pop()
        yield stmt
        blocks = [getattr(stmt, f, None) or [] for f in ("body", "orelse", "finalbody")]
        blocks += [h.body for h in getattr(stmt, "handlers", ())]
        blocks += [c.body for c in getattr(stmt, "cases", ())]
        for block in reversed(blocks):
            stack.extend(reversed(block))


def own_exprs(stmt: ast.stmt) -> list[ast.AST]:
    """The expressions of `stmt` itself, without its nested statements."""
    if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return list(stmt.decorator_list) + list(getattr(stmt, "bases", ()))
    return [c for c in ast.iter_child_nodes(stmt) if not isinstance(c, ast.stmt | ast.excepthandler)]


def _remote_def(node, src: Source, how: str) -> RemoteDef:
    first = node.decorator_list[0] if node.decorator_list else node
    kind = "actor" if isinstance(node, ast.ClassDef) else "function"
    line = src.line_text(node.lineno)
    keyword = "class" if kind == "actor" else "def"
    at = line.find(node.name, line.find(keyword) + len(keyword))
    name_span = Span(node.lineno - 1, max(at, 0), node.lineno - 1, max(at, 0) + len(node.name))
    span = Span(first.lineno - 1, len(src.indent_of(first.lineno)), node.lineno - 1, len(line))
    return RemoteDef(node.name, kind, span, name_span, how)


def scan_workspace(roots: list[Path], skip: Path | None = None) -> set[str]:
    """Names handed to `ray.remote(...)` in the Python files under `roots` (a cheap text filter
    first: only files that mention `remote(` are parsed)."""
    names: set[str] = set()
    seen = 0
    for root in roots:
        for folder, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith(".")]
            for f in files:
                if not f.endswith(".py"):
                    continue
                seen += 1
                if seen > MAX_SCAN_FILES:
                    log.info("workspace scan stopped after %d files", MAX_SCAN_FILES)
                    return names
                path = Path(folder) / f
                if skip is not None and path == skip:
                    continue
                names |= _names_in_file(path)
    return names


def _names_in_file(path: Path) -> set[str]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        log.debug("workspace scan skips %s: %s", path, exc)
        return set()
    if "remote(" not in text:
        return set()
    try:
        tree = ast.parse(text, str(path))
    except (SyntaxError, ValueError):
        return set()
    return handed_to_remote(tree, remote_aliases(tree))
