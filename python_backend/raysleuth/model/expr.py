"""Bounds on the Python a client asks the workers to run (conditions, snapshot expressions,
evaluate): checked on the broker, so that `"1+" * 100000` is a 400 with a hint, never a
RecursionError, a MemoryError or a worker busy parsing."""

from __future__ import annotations

import ast

from raysleuth.shared.errors import BadRequest
from raysleuth.shared.limits import MAX_EXPRESSION_CHARS, MAX_EXPRESSION_DEPTH


def check_expression(text: str, what: str, hint: str, syntax: bool = True) -> None:
    """BadRequest (with `hint`) unless `text` is one Python expression within the bounds (with
    `syntax` False, text that is no expression passes: only the bounds are checked)."""
    if len(text) > MAX_EXPRESSION_CHARS:
        raise BadRequest(
            f"{what} is {len(text)} characters long; at most {MAX_EXPRESSION_CHARS} are allowed",
            f"Shorten it (the broker's RAYSLEUTH_MAX_EXPRESSION_CHARS sets the bound). {hint}",
        )
    try:
        tree = ast.parse(text.strip(), "<expression>", mode="eval")
    except SyntaxError as exc:
        if not syntax:
            return
        raise BadRequest(f"{what} is not a Python expression: {exc.msg}", hint) from None
    except (RecursionError, MemoryError, ValueError) as exc:
        raise BadRequest(f"{what} cannot be parsed: {type(exc).__name__}", f"Simplify it. {hint}") from None
    if depth(tree) > MAX_EXPRESSION_DEPTH:
        raise BadRequest(
            f"{what} nests deeper than {MAX_EXPRESSION_DEPTH} levels",
            f"Simplify it (the broker's RAYSLEUTH_MAX_EXPRESSION_DEPTH sets the bound). {hint}",
        )


def is_expression(text: str) -> bool:
    """Whether `text` compiles as one Python expression (never raises)."""
    try:
        compile(text.strip(), "<condition>", "eval")
    except (SyntaxError, RecursionError, MemoryError, ValueError):
        return False
    return True


def depth(tree: ast.AST) -> int:
    """The deepest nesting of the tree, without recursion."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, d = stack.pop()
        deepest = max(deepest, d)
        stack.extend((child, d + 1) for child in ast.iter_child_nodes(node))
    return deepest
