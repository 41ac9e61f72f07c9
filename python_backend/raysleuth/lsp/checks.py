"""The static checks: leftover debugger calls in remote code and Ray's anti-patterns that cause
hangs and slowness, each a `Finding` with a one-line explanation and, where safe, a `Fix`.

Pure `ast` work over one document (target: a 5,000-line file in well under 200 ms).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from raysleuth.lsp.remotes import RemoteDef, find_remote_defs, is_task_call, remote_aliases
from raysleuth.lsp.source import Edit, Source, Span, dotted

LEFTOVER = "leftover-breakpoint"
GET_IN_LOOP = "ray-get-in-loop"
GET_SIBLINGS = "ray-get-own-tasks"
LARGE_BY_VALUE = "large-arg-by-value"
UNUSED_RESULT = "remote-result-unused"

DEBUGGER_CALLS = {
    "breakpoint": "breakpoint()",
    "pdb.set_trace": "pdb.set_trace()",
    "ipdb.set_trace": "ipdb.set_trace()",
    "ray.util.pdb.set_trace": "ray.util.pdb.set_trace()",
    "debugpy.breakpoint": "debugpy.breakpoint()",
}
DEBUGGER_MODULES = {"pdb", "ipdb", "debugpy", "ray.util.pdb"}
"""`import pdb; pdb.set_trace()`: an import of these on the same line goes with the call."""
ARRAY_MODULES = {"np", "numpy", "torch", "pd", "pandas", "jnp", "jax", "cupy", "tf", "scipy", "pa", "pyarrow"}
READERS = {"read", "read_bytes", "read_text", "load", "loads", "read_csv", "read_parquet", "read_json"}


@dataclass(frozen=True)
class Fix:
    """A quick fix: text edits, and maybe a cluster breakpoint to set at `breakpoint_line`."""

    title: str
    edits: tuple[Edit, ...]
    breakpoint_line: int | None = None
    #: 1-based line, after the edits, where a cluster breakpoint replaces the removed call.


@dataclass(frozen=True)
class Finding:
    code: str
    message: str
    span: Span
    severity: str = "warning"
    #: "warning" or "information".
    fix: Fix | None = None


@dataclass
class Analysis:
    """What one version of a document holds: its remote definitions and its findings."""

    defs: list[RemoteDef] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)


def analyze(text: str, workspace_names: frozenset[str] = frozenset()) -> Analysis | None:
    """Remote defs and findings of `text`; None when it does not parse (mid-typing)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    src = Source(text)
    defs = find_remote_defs(tree, src, workspace_names)
    checker = _Checker(src, remote_aliases(tree), {d.name_span.line + 1 for d in defs}, tree)
    checker.visit(tree)
    return Analysis(defs, sorted(checker.findings, key=lambda f: (f.span.line, f.span.col)))


class _Loop:
    """A loop being visited: its statement (where a fix inserts before), the names it binds and
    the names it assigns from task calls."""

    def __init__(self, node: ast.AST, anchor: ast.stmt) -> None:
        self.node = node
        self.anchor = anchor
        self.bound = {
            n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
        }
        self.refs = _names_from_tasks(node)
        self.reported: set[str] = set()


class _Checker(ast.NodeVisitor):
    def __init__(
        self, src: Source, aliases: frozenset[str], remote_lines: set[int], tree: ast.Module
    ) -> None:
        self.src = src
        self.aliases = aliases
        self.remote_lines = remote_lines
        self.findings: list[Finding] = []
        self.in_remote = False
        self.remote_fn_refs: set[str] | None = None
        """Names the innermost remote function assigns from task calls; None outside one."""
        self.loops: list[_Loop] = []
        self.stmts: list[ast.stmt] = []
        self.scopes: list[dict[str, ast.AST]] = [_bindings(tree)]
        self.parents: dict[int, list[ast.stmt]] | None = None
        self.tree = tree

    # --- scopes -------------------------------------------------------------------------------

    def _visit_def(self, node) -> None:
        remote = node.lineno in self.remote_lines
        saved = self.in_remote, self.remote_fn_refs, self.loops
        self.in_remote = self.in_remote or remote
        if remote and not isinstance(node, ast.ClassDef):
            self.remote_fn_refs = _names_from_tasks(node)
        elif isinstance(node, ast.ClassDef):
            self.remote_fn_refs = None  # an actor's methods hold their worker anyway
        self.loops = []
        self.scopes.append(_bindings(node))
        self.generic_visit(node)
        self.scopes.pop()
        self.in_remote, self.remote_fn_refs, self.loops = saved

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _visit_def

    def generic_visit(self, node: ast.AST) -> None:
        if isinstance(node, ast.stmt):
            self.stmts.append(node)
            super().generic_visit(node)
            self.stmts.pop()
        else:
            super().generic_visit(node)

    def _visit_loop(self, node) -> None:
        self.stmts.append(node)
        if isinstance(node, ast.While):
            self.visit(node.test)
        else:
            self.visit(node.target)
            self.visit(node.iter)  # evaluated once, outside the loop
        self.loops.append(_Loop(node, node))
        for child in node.body + node.orelse:
            self.visit(child)
        self.loops.pop()
        self.stmts.pop()

    visit_For = visit_AsyncFor = visit_While = _visit_loop

    def _visit_comprehension(self, node) -> None:
        gens = node.generators
        self.visit(gens[0].iter)  # the outermost iterable is evaluated once
        self.loops.append(_Loop(node, self.stmts[-1]))
        for i, g in enumerate(gens):
            self.visit(g.target)
            if i:
                self.visit(g.iter)
            for cond in g.ifs:
                self.visit(cond)
        for part in (node.key, node.value) if isinstance(node, ast.DictComp) else (node.elt,):
            self.visit(part)
        self.loops.pop()

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = _visit_comprehension

    # --- the rules ----------------------------------------------------------------------------

    def visit_Expr(self, node: ast.Expr) -> None:
        call = node.value
        if is_task_call(call) and not _detached(call):
            self.findings.append(
                Finding(
                    UNUSED_RESULT,
                    "The result of this remote call is never used: if it fails, nobody sees the error. "
                    "Keep the ref and ray.get or ray.wait it.",
                    self.src.span(call),
                )
            )
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        name = dotted(node.func)
        if self.in_remote and name in DEBUGGER_CALLS:
            self._leftover(node, DEBUGGER_CALLS[name])
        elif name == "ray.get" and node.args:
            self._ray_get(node)
        if is_task_call(node) and self.loops:
            self._by_value(node)
        self.generic_visit(node)

    def _leftover(self, call: ast.Call, what: str) -> None:
        fix = self._leftover_fix(call, what)
        self.findings.append(
            Finding(
                LEFTOVER,
                f"{what} left in remote code stops every worker that runs it, with no debugger "
                "attached. Use a cluster breakpoint instead.",
                self.src.span(call),
                fix=fix,
            )
        )

    def _ray_get(self, call: ast.Call) -> None:
        arg = call.args[0]
        tasks = any(is_task_call(n) for n in ast.walk(arg))
        if self.loops and (tasks or _names_in(arg) & self.loops[-1].refs):
            self.findings.append(
                Finding(
                    GET_IN_LOOP,
                    "ray.get inside a loop waits for each task before the next is submitted, so they "
                    "run one at a time. Submit them all, then ray.get the list.",
                    self.src.span(call),
                    fix=self._get_in_comprehension_fix(call),
                )
            )
        elif self.remote_fn_refs is not None and (tasks or _names_in(arg) & self.remote_fn_refs):
            self.findings.append(
                Finding(
                    GET_SIBLINGS,
                    "ray.get in a remote task on tasks it started blocks this worker; with no free "
                    "resources for them they never start (a hang). Return the refs, or ask for less.",
                    self.src.span(call),
                    severity="information",
                )
            )

    def _by_value(self, call: ast.Call) -> None:
        for arg in list(call.args) + [k.value for k in call.keywords]:
            if not isinstance(arg, ast.Name) or not _looks_large(self._binding(arg.id)):
                continue
            loop = next((lp for lp in self.loops if arg.id not in lp.bound), None)
            if loop is None or arg.id in loop.reported:
                continue
            loop.reported.add(arg.id)
            self.findings.append(
                Finding(
                    LARGE_BY_VALUE,
                    f"{arg.id} is copied into the object store for every task. "
                    f"Put it once with ray.put({arg.id}) before the loop and pass the ref.",
                    self.src.span(arg),
                    fix=self._put_once_fix(arg.id, loop),
                )
            )

    def _binding(self, name: str) -> ast.AST | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    # --- fixes --------------------------------------------------------------------------------

    def _leftover_fix(self, call: ast.Call, what: str) -> Fix | None:
        stmt = self.stmts[-1] if self.stmts else None
        if not isinstance(stmt, ast.Expr) or stmt.value is not call:
            return None
        body = self._parent_body(stmt)
        first, last = stmt.lineno, stmt.end_lineno
        on_lines = [s for s in body if s.lineno <= last and s.end_lineno >= first]
        if any(s is not stmt and not _debugger_import(s) for s in on_lines):
            return None
        first, last = min(s.lineno for s in on_lines), max(s.end_lineno for s in on_lines)
        head = self.src.line_text(first)[: on_lines[0].col_offset]
        tail = self.src.line_text(last).encode()[on_lines[-1].end_col_offset :].decode().strip()
        if head.strip() or (tail and not tail.startswith("#")):
            return None
        rest = [s for s in body if s not in on_lines]
        after = [s for s in rest if s.lineno > last]
        span = self.src.whole_lines(first, last)
        if after:
            target = after[0]
            line = (target.decorator_list[0] if getattr(target, "decorator_list", None) else target).lineno
            edit, bp = Edit(span, ""), line - (last - first + 1)
        else:  # the block's last statement: keep the block valid, stop at the same line
            edit, bp = Edit(span, f"{self.src.indent_of(first)}pass\n"), first
        title = f"Remove {what} and set a cluster breakpoint at line {bp}"
        return Fix(title, (edit,), breakpoint_line=bp)

    def _parent_body(self, stmt: ast.stmt) -> list[ast.stmt]:
        if self.parents is None:
            self.parents = {}
            for node in ast.walk(self.tree):
                for fname in ("body", "orelse", "finalbody"):
                    seq = getattr(node, fname, None)
                    if isinstance(seq, list):
                        for s in seq:
                            self.parents[id(s)] = seq
        return self.parents.get(id(stmt), [stmt])

    def _get_in_comprehension_fix(self, call: ast.Call) -> Fix | None:
        """`[ray.get(f.remote(x)) for x in xs]` → `ray.get([f.remote(x) for x in xs])`."""
        comp = self.loops[-1].node
        if not isinstance(comp, ast.ListComp) or comp.elt is not call or len(call.args) != 1 or call.keywords:
            return None
        inner = self.src.segment(call.args[0])
        rest = self.src.between(call.end_lineno, call.end_col_offset, comp.end_lineno, comp.end_col_offset)
        text = f"ray.get([{inner}{rest})"
        return Fix("Submit all tasks first, then ray.get the list", (Edit(self.src.span(comp), text),))

    def _put_once_fix(self, name: str, loop: _Loop) -> Fix | None:
        anchor = loop.anchor
        if self.src.line_text(anchor.lineno)[: anchor.col_offset].strip():
            return None  # the loop shares its line with other code: no safe place to insert
        ref = f"{name}_ref"
        indent = self.src.indent_of(anchor.lineno)
        edits = [Edit(Span(anchor.lineno - 1, 0, anchor.lineno - 1, 0), f"{indent}{ref} = ray.put({name})\n")]
        for node in ast.walk(loop.node):
            if is_task_call(node):
                for arg in list(node.args) + [k.value for k in node.keywords]:
                    if isinstance(arg, ast.Name) and arg.id == name:
                        edits.append(Edit(self.src.span(arg), ref))
        return Fix(f"Put {name} in the object store once (ray.put) and pass {ref}", tuple(edits))


def _bindings(scope: ast.AST) -> dict[str, ast.AST]:
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


def _names_from_tasks(scope: ast.AST) -> set[str]:
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


def _names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _looks_large(value: ast.AST | None) -> bool:
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


def _detached(call: ast.Call) -> bool:
    """`A.options(name=..., lifetime="detached").remote()`: kept alive by name, on purpose."""
    node = call.func.value
    while isinstance(node, ast.Call | ast.Attribute):
        if isinstance(node, ast.Call) and any(k.arg == "lifetime" for k in node.keywords):
            return True
        node = node.func if isinstance(node, ast.Call) else node.value
    return False


def _debugger_import(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.Import):
        return all(a.name in DEBUGGER_MODULES for a in stmt.names)
    return (
        isinstance(stmt, ast.ImportFrom)
        and f"{stmt.module}" in ("ray.util",)
        and all(a.name == "pdb" for a in stmt.names)
    )
