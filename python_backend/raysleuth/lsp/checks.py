"""The static checks: leftover debugger calls in remote code and Ray's anti-patterns that cause
hangs and slowness, each a `Finding` with a one-line explanation and, where safe, a `Fix`.

Pure `ast` work over one document (target: a 5,000-line file in well under 200 ms).
"""

from __future__ import annotations

import ast
import bisect
import functools
from dataclasses import dataclass

from raysleuth.lsp.findings import Analysis, Finding, Fix
from raysleuth.lsp.patterns import (
    blocks,
    debugger_import,
    detached,
    looks_large,
    names_from_tasks,
    names_in,
    scope_bindings,
    statement_header,
)
from raysleuth.lsp.remotes import (
    find_remote_defs,
    handed_to_remote,
    is_task_call,
    iter_statements,
    own_exprs,
    remote_aliases,
)
from raysleuth.lsp.source import Edit, Source, Span, dotted, end_line, end_of

__all__ = ["Analysis", "Finding", "Fix", "analyze", "check_part", "parse_part"]

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


HOT_WORDS = ("ray.get", "remote(", "breakpoint", "set_trace")
"""A finding needs one of these on its statement's lines: other statements are never walked
below the statement level, which keeps a 5,000-line file near the cost of its parse."""


def analyze(text: str, workspace_names: frozenset[str] = frozenset()) -> Analysis | None:
    """Remote defs and findings of `text`; None when it does not parse (mid-typing)."""
    part = parse_part(text)
    if part is None:
        return None
    return check_part(part, part.aliases, frozenset(part.here) | workspace_names, part.module_large)


@dataclass
class Part:
    """A parsed module, or one top-level chunk of it (lsp/incremental.py), with what the other
    chunks need to know of it."""

    tree: ast.Module
    src: Source
    aliases: frozenset[str]
    #: Names meaning ray.remote here (`from ray import remote`).
    here: frozenset[str]
    #: Names this part hands to ray.remote(...).
    module_large: frozenset[str]
    #: Module-level names bound to something that looks large (an array, a comprehension...).


def parse_part(text: str) -> Part | None:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    src = Source(text)
    aliases = remote_aliases(tree)
    calls = HotLines(src.lines, ("remote(",))
    here: set[str] = set()
    for stmt in iter_statements(tree.body):
        if calls.any(stmt.lineno, stmt.end_lineno):
            for e in own_exprs(stmt):
                here |= handed_to_remote(e, aliases)
    large = frozenset(n for n, v in scope_bindings(tree).items() if looks_large(v))
    return Part(tree, src, aliases, frozenset(here), large)


def check_part(
    part: Part, aliases: frozenset[str], remote_names: frozenset[str], module_large: frozenset[str]
) -> Analysis:
    """Findings of one part, given what the whole module says: its ray.remote aliases, the
    names handed to ray.remote (workspace included) and its large module-level names."""
    defs = find_remote_defs(part.tree, part.src, remote_names, remote_names, aliases)
    hot = HotLines(part.src.lines, HOT_WORDS)
    checker = _Checker(part.src, hot, {d.name_span.line + 1 for d in defs}, part.tree, module_large)
    checker.run(part.tree.body)
    return Analysis(defs, sorted(checker.findings, key=lambda f: (f.span.line, f.span.col)))


class HotLines:
    """The 1-based numbers of the lines that contain one of `words`, for range queries."""

    def __init__(self, lines: list[str], words: tuple[str, ...]) -> None:
        self.numbers = [i for i, line in enumerate(lines, 1) if any(w in line for w in words)]

    def any(self, first: int, last: int) -> bool:
        i = bisect.bisect_left(self.numbers, first)
        return i < len(self.numbers) and self.numbers[i] <= last


class _Loop:
    """A loop being visited: its statement (where a fix inserts before), the names it binds and
    the names it assigns from task calls (both computed only when a rule asks)."""

    def __init__(self, node: ast.AST, anchor: ast.stmt) -> None:
        self.node = node
        self.anchor = anchor
        self.reported: set[str] = set()

    @functools.cached_property
    def bound(self) -> set[str]:
        return {n.id for n in ast.walk(self.node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}

    @functools.cached_property
    def refs(self) -> set[str]:
        return names_from_tasks(self.node)


class _Checker(ast.NodeVisitor):
    """Walks statements, keeping the context (remote code? which loops? which scope?), and goes
    into the expressions of the hot ones only."""

    def __init__(
        self,
        src: Source,
        hot: HotLines,
        remote_lines: set[int],
        tree: ast.Module,
        module_large: frozenset[str],
    ) -> None:
        self.src = src
        self.module_large = module_large
        self.hot = hot
        self.remote_lines = remote_lines
        self.findings: list[Finding] = []
        self.in_remote = False
        self.remote_fn: ast.AST | None = None
        """The innermost remote function (not an actor method) being visited."""
        self.loops: list[_Loop] = []
        self.stmts: list[ast.stmt] = []
        self.scopes: list[ast.AST] = [tree]
        self.parents: dict[int, list[ast.stmt]] = {}
        self._cache: dict[tuple[str, int], object] = {}

    # --- statements ---------------------------------------------------------------------------

    def run(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            self.parents[id(stmt)] = body
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                self._visit_def(stmt)
                continue
            self.stmts.append(stmt)
            header = statement_header(stmt)
            if header is not None:  # a compound statement: its header's expressions, then its blocks
                if header and self.hot.any(stmt.lineno, max(end_line(e) for e in header)):
                    for e in header:
                        self.visit(e)
                if isinstance(stmt, ast.For | ast.AsyncFor | ast.While):
                    self.loops.append(_Loop(stmt, stmt))
                    self.run(stmt.body)
                    self.loops.pop()
                    self.run(stmt.orelse)
                else:
                    for block in blocks(stmt):
                        self.run(block)
            elif self.hot.any(stmt.lineno, end_line(stmt)):
                self.visit(stmt)
            self.stmts.pop()

    def _visit_def(self, node) -> None:
        remote = node.lineno in self.remote_lines
        saved = self.in_remote, self.remote_fn, self.loops
        self.in_remote = self.in_remote or remote
        if remote and not isinstance(node, ast.ClassDef):
            self.remote_fn = node
        elif isinstance(node, ast.ClassDef):
            self.remote_fn = None  # an actor's methods hold their worker anyway
        self.loops = []
        self.scopes.append(node)
        self.run(node.body)
        self.scopes.pop()
        self.in_remote, self.remote_fn, self.loops = saved

    def _cached(self, kind: str, node: ast.AST, make):
        key = (kind, id(node))
        if key not in self._cache:
            self._cache[key] = make(node)
        return self._cache[key]

    def _remote_fn_refs(self) -> set[str] | None:
        """Names the innermost remote function assigns from task calls; None outside one."""
        return None if self.remote_fn is None else self._cached("refs", self.remote_fn, names_from_tasks)

    # --- expressions of a hot statement -------------------------------------------------------

    def visit_Lambda(self, node: ast.Lambda) -> None:
        saved, self.loops = self.loops, []  # a lambda's body runs when called, not per pass
        self.generic_visit(node)
        self.loops = saved

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
        if isinstance(call, ast.Call) and is_task_call(call) and not detached(call):
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
        if self.loops and (tasks or (names_in(arg) & self.loops[-1].refs and self._one_at_a_time(call))):
            self.findings.append(
                Finding(
                    GET_IN_LOOP,
                    "ray.get inside a loop waits for each task before the next is submitted, so they "
                    "run one at a time. Submit them all, then ray.get the list.",
                    self.src.span(call),
                    fix=self._get_in_comprehension_fix(call),
                )
            )
        elif (refs := self._remote_fn_refs()) is not None and (tasks or names_in(arg) & refs):
            self.findings.append(
                Finding(
                    GET_SIBLINGS,
                    "ray.get in a remote task on tasks it started blocks this worker; with no free "
                    "resources for them they never start (a hang). Return the refs, or ask for less.",
                    self.src.span(call),
                    severity="information",
                )
            )

    def _one_at_a_time(self, get: ast.Call) -> bool:
        """The loop submits one task before this get: a step that submits several (or a
        comprehension of them) first runs them side by side, and waiting for them is fine."""
        where = (get.lineno, get.col_offset)
        nodes = [
            n for n in ast.walk(self.loops[-1].node)
            if isinstance(n, ast.expr | ast.stmt) and (n.lineno, n.col_offset) < where
        ]  # fmt: skip
        before = [n for n in nodes if is_task_call(n)]
        many = any(
            isinstance(c, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp)
            and any(is_task_call(n) for n in ast.walk(c))
            for c in nodes
        )
        return len(before) <= 1 and not many

    def _by_value(self, call: ast.Call) -> None:
        for arg in list(call.args) + [k.value for k in call.keywords]:
            if not isinstance(arg, ast.Name) or not self._large(arg.id):
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

    def _large(self, name: str) -> bool:
        """Whether `name`, where it is used, is bound to something that looks large."""
        for scope in reversed(self.scopes):
            if isinstance(scope, ast.Module):
                return name in self.module_large
            bindings = self._cached("bindings", scope, scope_bindings)
            if name in bindings:
                return looks_large(bindings[name])
        return False

    # --- fixes --------------------------------------------------------------------------------

    def _leftover_fix(self, call: ast.Call, what: str) -> Fix | None:
        stmt = self.stmts[-1] if self.stmts else None
        if not isinstance(stmt, ast.Expr) or stmt.value is not call:
            return None
        body = self._parent_body(stmt)
        first, last = stmt.lineno, end_line(stmt)
        on_lines = [s for s in body if s.lineno <= last and end_line(s) >= first]
        if any(s is not stmt and not debugger_import(s) for s in on_lines):
            return None
        first, last = min(s.lineno for s in on_lines), max(end_line(s) for s in on_lines)
        head = self.src.line_text(first)[: on_lines[0].col_offset]
        tail = self.src.line_text(last).encode()[end_of(on_lines[-1])[1] :].decode().strip()
        if head.strip() or (tail and not tail.startswith("#")):
            return None
        rest = [s for s in body if s not in on_lines]
        after = [s for s in rest if s.lineno > last]
        span = self.src.whole_lines(first, last)
        if after:
            target = after[0]
            decorators = getattr(target, "decorator_list", None)
            line = (decorators[0] if decorators else target).lineno
            edit, bp = Edit(span, ""), line - (last - first + 1)
        else:  # the block's last statement: keep the block valid, stop at the same line
            edit, bp = Edit(span, f"{self.src.indent_of(first)}pass\n"), first
        title = f"Remove {what} and set a cluster breakpoint on its line instead"
        return Fix(title, (edit,), breakpoint_line=bp)

    def _parent_body(self, stmt: ast.stmt) -> list[ast.stmt]:
        return self.parents.get(id(stmt), [stmt])

    def _get_in_comprehension_fix(self, call: ast.Call) -> Fix | None:
        """`[ray.get(f.remote(x)) for x in xs]` → `ray.get([f.remote(x) for x in xs])`."""
        comp = self.loops[-1].node
        if not isinstance(comp, ast.ListComp) or comp.elt is not call or len(call.args) != 1 or call.keywords:
            return None
        inner = self.src.segment(call.args[0])
        rest = self.src.between(*end_of(call), *end_of(comp))
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
            if isinstance(node, ast.Call) and is_task_call(node):
                for arg in list(node.args) + [k.value for k in node.keywords]:
                    if isinstance(arg, ast.Name) and arg.id == name:
                        edits.append(Edit(self.src.span(arg), ref))
        return Fix(f"Put {name} in the object store once (ray.put) and pass {ref}", tuple(edits))
