"""Expressions that obviously never finish in C code, where no budget can stop them (#23, #37).

A condition, a logpoint's `{…}`, a snapshot or watch expression or an evaluate runs in the
worker. Ray Sleuth answers a slow evaluate and disarms a slow condition, but a single call into C
(`sum(range(10**12))`) cannot be interrupted: it holds the GIL, so no thread of that worker (not
even Ray Sleuth's agent) runs until it returns. The language server warns on the obvious cases
and the broker refuses them (400, unless the request says `force: true`), read from the syntax
tree without running anything: a constant range or repetition of a hundred million items or
more, an integer power with millions of digits, and an endless `itertools` iterator consumed
whole. Pure: no I/O, used by the broker and the language server alike.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Iterable

from raysleuth.shared.errors import BadRequest

HUGE = 10**8
"""Items a C loop may take before the expression counts as unbounded (about a second or more)."""

DIGITS = 10**6
"""Digits of an integer power past which computing it counts as unbounded."""

CONSUMERS = frozenset(
    {"sum", "list", "tuple", "set", "sorted", "max", "min", "len", "any", "all", "dict", "frozenset"}
)
"""Calls that consume an iterator whole."""
ENDLESS = frozenset({"count", "cycle"})


def unbounded_reason(expression: str) -> str | None:
    """Why `expression` may never finish, or None when nothing obvious is found (or it does not
    parse: the broker answers that with its own error)."""
    try:
        tree = ast.parse(expression.strip() or "None", mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    for node in ast.walk(tree):
        reason = _node_reason(node)
        if reason:
            return reason
    return None


def _node_reason(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call):
        name = _call_name(node)
        if name == "range" and node.args:
            n = _range_len([_int_value(a) for a in node.args[:3]])
            if n is not None and n >= HUGE:
                return f"{ast.unparse(node)} has {_size(n)} items"
        if name in CONSUMERS and node.args and _endless(node.args[0]):
            return f"{name}() over {ast.unparse(node.args[0])} never ends"
    if isinstance(node, ast.BinOp):
        if isinstance(node.op, ast.Pow):
            base, exp = _int_value(node.left), _int_value(node.right)
            if base is not None and exp is not None and abs(base) > 1 and exp > 0:
                if exp * math.log10(abs(base)) >= DIGITS:
                    return f"{ast.unparse(node)} has millions of digits"
        if isinstance(node.op, ast.Mult):
            for seq, count in ((node.left, node.right), (node.right, node.left)):
                n = _int_value(count)
                if isinstance(seq, (ast.List, ast.Tuple, ast.Constant)) and not _is_number(seq):
                    if n is not None and n >= HUGE:
                        return f"{ast.unparse(node)} builds {_size(n)} items"
    return None


def _range_len(args: list[int | None]) -> int | None:
    known = [a for a in args if a is not None]
    if len(known) != len(args) or not known:
        return None
    start, stop, step = (0, known[0], 1) if len(known) == 1 else (known[0], known[1], 1)
    if len(known) > 2:
        step = known[2]
    if not step:
        return None
    return max(0, (stop - start) // step)


def _call_name(node: ast.Call) -> str | None:
    f = node.func
    if isinstance(f, ast.Name):
        return f.id
    if isinstance(f, ast.Attribute):
        return f.attr
    return None


def _endless(node: ast.AST) -> bool:
    """`itertools.count()`, `cycle(x)` or `repeat(x)` without a count."""
    if not isinstance(node, ast.Call):
        return False
    name = _call_name(node)
    return name in ENDLESS or (name == "repeat" and len(node.args) < 2 and not node.keywords)


def _is_number(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, (int, float, complex))


def _int_value(node: ast.AST, depth: int = 0) -> int | None:
    """The value of a constant integer expression (literals, + - * ** // and unary -), without
    computing anything huge: a power past DIGITS digits counts as 10**DIGITS."""
    if depth > 20:
        return None
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _int_value(node.operand, depth + 1)
        return None if v is None else -v
    if isinstance(node, ast.BinOp):
        a, b = _int_value(node.left, depth + 1), _int_value(node.right, depth + 1)
        if a is None or b is None:
            return None
        if isinstance(node.op, ast.Pow):
            if b < 0:
                return None
            if abs(a) > 1 and b * math.log10(abs(a)) >= 18:
                return 10**18  # big enough to flag, small enough to keep counting with
            return a**b
        ops = {ast.Add: lambda: a + b, ast.Sub: lambda: a - b, ast.Mult: lambda: a * b}
        if type(node.op) in ops:
            return max(min(ops[type(node.op)](), 10**18), -(10**18))
        if isinstance(node.op, ast.FloorDiv) and b:
            return a // b
    return None


def _size(n: int) -> str:
    n = abs(n)
    return f"10^{len(str(n)) - 1}" if n >= 10**6 else f"{n:,}"


FORCE_HINT = (
    "It would hold the worker's GIL until it ends: no thread of that worker, Ray Sleuth's agent"
    " included, runs meanwhile, and only ending the worker stops it. Bound it (a smaller range, a"
    ' slice), or send it anyway with "force": true (`--force` on the command line).'
)


def refuse_unbounded(expressions: Iterable[tuple[str, str]], force: object) -> None:
    """BadRequest {error, hint} for the first (what, expression) that `unbounded_reason` flags,
    unless `force` is True. `what` names it for the error: "the evaluate", "line 12's condition"."""
    if force is True:
        return
    if force not in (None, False):
        raise BadRequest(f"'force' must be true or false, not {force!r}", 'Send "force": true.')
    for what, expression in expressions:
        reason = unbounded_reason(expression)
        if reason:
            raise BadRequest(f"{what} may never finish: {reason}", FORCE_HINT)
