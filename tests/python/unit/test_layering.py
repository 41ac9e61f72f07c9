"""The package's layers, read from the source with `ast`: which room may import which.

The broker never imports the agent (the worker's hot path) and the agent never imports the
broker or the CLI; no import cycle anywhere, lazy imports inside functions included.
"""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[3] / "python_backend" / "raysleuth"

CLI = ("raysleuth.cli", "raysleuth.__main__")
"""The command line: nothing below it may import it."""


def module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PKG.rglob("*.py")}


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """Every raysleuth module `path` imports, at module level or inside a function."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name:
                out.add(t)
    return out


def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {name: imports_of(name, path, known) for name, path in mods.items()}


def in_room(name: str, room: str) -> bool:
    return name == room or name.startswith(room + ".")


def _packages_of(name: str) -> set[str]:
    """A module's parent packages: importing `a.b.c` runs `a/__init__` and `a/b/__init__` first."""
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))}


SHARED = (
    "raysleuth.model", "raysleuth.dap", "raysleuth.shared", "raysleuth.probes",
)  # fmt: skip
"""Modules every side may use: they import neither the broker, the agent nor the CLI."""


def imports_across(rooms: tuple[str, ...], forbidden: tuple[str, ...]) -> list[tuple[str, str]]:
    """(module, import) pairs where a module of `rooms` imports one of `forbidden` or the CLI."""
    return [
        (m, t)
        for m, ts in graph().items()
        if any(in_room(m, r) for r in rooms)
        for t in ts
        if any(in_room(t, f) for f in (*forbidden, *CLI))
    ]


def test_the_broker_never_imports_the_agent_or_the_cli():
    bad = imports_across(("raysleuth.broker",), ("raysleuth.agent",))
    assert not bad, f"broker modules import the agent or the CLI: {bad}"


def test_the_agent_never_imports_the_broker_or_the_cli():
    bad = imports_across(("raysleuth.agent",), ("raysleuth.broker",))
    assert not bad, f"agent modules import the broker or the CLI: {bad}"


def test_the_language_server_imports_neither_the_broker_nor_the_agent():
    """`raysleuth lsp` is a client of the broker (HTTP + SSE), like the CLI (issue 15)."""
    bad = imports_across(("raysleuth.lsp",), ("raysleuth.broker", "raysleuth.agent"))
    assert not bad, f"language server modules import the broker, the agent or the CLI: {bad}"


def test_shared_modules_import_neither_side():
    bad = imports_across(SHARED, ("raysleuth.agent", "raysleuth.broker"))
    assert not bad, f"shared modules import a side: {bad}"


def test_the_check_would_see_a_broker_module_importing_the_agent(tmp_path):
    """The walk resolves `from raysleuth.agent import x` and relative imports to modules."""
    known = {"raysleuth.agent", "raysleuth.agent.core", "raysleuth.broker", "raysleuth.broker.app"}
    src = tmp_path / "app.py"
    src.write_text(
        "from raysleuth.agent import core\nfrom . import app\ndef f():\n    import raysleuth.agent\n"
    )
    assert imports_of("raysleuth.broker.app", src, known) == {
        "raysleuth.agent.core",
        "raysleuth.agent",
        "raysleuth.broker",
    }


def test_no_import_cycles():
    g = graph()
    # A package's own __init__ importing its submodules is how packages work, not a cycle.
    edges = {m: {t for t in ts if t not in _packages_of(m)} for m, ts in g.items()}
    cycles: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in sorted(edges.get(m, ())):
            if state.get(t) == 1:
                cycles.append(stack[stack.index(t) :] + [t])
            elif t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            visit(m)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_walk_sees_the_package():
    g = graph()
    assert "raysleuth.broker.http_api" in g and "raysleuth.agent" in g
    assert any(in_room(t, "raysleuth.model") for t in g["raysleuth.model.point"])


def test_modules_and_classes_stay_small():
    """No module over 400 lines (issue 24), no class over 350 (issue 10)."""
    big = []
    for name, path in modules().items():
        text = path.read_text()
        lines = text.count("\n") + 1
        if lines > 400:
            big.append(f"{name}: {lines} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > 350:
                big.append(f"{name}.{node.name}: {node.end_lineno - node.lineno + 1} lines")
    assert not big, "too big: " + ", ".join(big)


def test_the_broker_that_builds_the_services_stays_under_300_lines():
    tree = ast.parse((PKG / "broker" / "app.py").read_text())
    [broker] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Broker"]
    assert broker.end_lineno - broker.lineno + 1 < 300
