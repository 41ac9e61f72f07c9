"""The language server warns on breakpoint expressions that obviously never finish in C code
(#23): no budget can stop `sum(range(10**12))` once a worker runs it, so the editor says so first.
Nothing is run to find out: only the syntax tree is read."""

from __future__ import annotations

import pytest

from raysleuth.lsp.points import UNBOUNDED, breakpoint_findings
from raysleuth.lsp.source import Source
from raysleuth.lsp.unbounded import unbounded_reason

CODE = "def step(x):\n    y = x + 1\n    return y\n"


@pytest.mark.parametrize(
    "expression",
    [
        "sum(range(10**12))",
        "any(i < 0 for i in range(0, 10**12, 1))",
        "len(list(itertools.count()))",
        "max(repeat(1))",
        "sorted(cycle([1, 2]))",
        "2 ** 10 ** 9 > 0",
        "len([0] * 10**9)",
        "len('x' * 10**10)",
    ],
)
def test_obviously_unbounded_expressions_are_named(expression):
    assert unbounded_reason(expression)


@pytest.mark.parametrize(
    "expression",
    [
        "step % 100 == 0",
        "sum(range(1000)) > 0",
        "range(n)",  # a local: its size is not known here
        "next(itertools.count())",
        "range(0, 10**9, 10**8)",  # ten items
        "3 * 10**9 > x",
        "list(repeat(1, 5))",
        "1+",  # does not parse: the broker answers it with its own error
        "1+" * 100000 + "1",  # too deep to parse: the same
        "",
    ],
)
def test_bounded_or_unknown_expressions_pass(expression):
    assert unbounded_reason(expression) is None


def findings(editor, cluster=()):
    return breakpoint_findings(Source(CODE), "/w/train.py", editor, list(cluster), None)


def test_an_editor_condition_that_never_finishes_gets_a_warning_on_its_line():
    [f] = findings([{"line": 2, "condition": "[rank 0] sum(range(10**12)) > 0"}])
    assert f.code == UNBOUNDED and f.span.line == 1
    assert "condition may never finish" in f.message and "10^12 items" in f.message


def test_a_cluster_logpoint_expression_that_never_finishes_is_flagged():
    bp = {"path": "/w/train.py", "line": 3, "logMessage": "y={y} total={sum(range(10**12))}", "owner": "cli"}
    [f] = findings([], [bp])
    assert f.code == UNBOUNDED and "logpoint may never finish" in f.message


def test_ordinary_breakpoints_get_no_warning():
    bp = {"path": "/w/train.py", "line": 3, "logMessage": "y={y}", "owner": "cli"}
    assert findings([{"line": 2, "condition": "[rank 0] x % 100 == 0"}], [bp]) == []
