"""Diagnostics on breakpoints of a file: a rank scope that does not parse, a `[rank N]` scope
for ranks no live worker has, and a condition or logpoint expression that obviously never
finishes (`unbounded.py`). Editor breakpoints come from the client (it alone knows them);
cluster ones from the broker. Scopes are parsed by `raysleuth.model.scope`, the one grammar."""

from __future__ import annotations

import os

from raysleuth.lsp.findings import Finding
from raysleuth.lsp.source import Source, Span
from raysleuth.lsp.unbounded import unbounded_reason
from raysleuth.model.point import log_expressions
from raysleuth.model.scope import format_ranks, split_condition, with_ranks
from raysleuth.model.worker import Worker
from raysleuth.shared.errors import SleuthError

BAD_SCOPE = "rank-scope-invalid"
NO_SUCH_RANK = "rank-not-in-job"
UNBOUNDED = "expression-unbounded"


def same_path(a: str, b: str) -> bool:
    return os.path.normcase(os.path.realpath(a)) == os.path.normcase(os.path.realpath(b))


def breakpoint_findings(
    src: Source, path: str, editor: list[dict], cluster: list[dict], workers: list[Worker] | None
) -> list[Finding]:
    """`editor`: [{line (1-based), condition}] from the client; `cluster`: GET /v1/breakpoints rows."""
    out: list[Finding] = []
    seen: set[tuple[int, str]] = set()
    ranks_known = _job_ranks(workers or [])
    mine = [bp for bp in cluster if bp.get("path") and same_path(bp["path"], path)]
    for origin, bps in (("editor", editor), ("cluster", mine)):
        for bp in bps:
            line = bp.get("line")
            if not isinstance(line, int) or line < 1:
                continue
            cond = bp.get("condition") or ""
            if (line, cond) in seen:
                continue
            seen.add((line, cond))
            span = _line_span(src, line)
            try:
                scope, expr = split_condition(cond)
                scope = with_ranks(scope, bp.get("ranks"))
            except SleuthError as exc:
                hint = f" {exc.hint}" if exc.hint else ""
                out.append(Finding(BAD_SCOPE, f"Breakpoint scope does not parse: {exc.message}.{hint}", span))
                continue
            finding = _unbounded(expr, bp.get("logMessage"), span)
            if finding is not None:
                out.append(finding)
            if scope.ranks is None or ranks_known is None:
                continue
            missing = sorted(scope.ranks - ranks_known)
            if missing:
                where = (
                    "this breakpoint" if origin == "editor" else f"the cluster breakpoint ({bp.get('owner')})"
                )
                out.append(
                    Finding(
                        NO_SUCH_RANK,
                        f"[rank {format_ranks(missing)}]: the cluster's workers have ranks "
                        f"{format_ranks(ranks_known)}, so {where} never stops there.",
                        span,
                    )
                )
    return out


def _unbounded(condition: str | None, log_message: str | None, span: Span) -> Finding | None:
    """A warning when the condition, or an expression in the logpoint's braces, never finishes."""
    parts = [("condition", condition)] + [("logpoint", e) for e in log_expressions(log_message or "")]
    for what, expr in parts:
        reason = unbounded_reason(expr or "")
        if reason:
            return Finding(
                UNBOUNDED,
                f"This breakpoint's {what} may never finish: {reason}, in C code that Ray Sleuth "
                "cannot interrupt, so each worker that reaches the line would freeze there.",
                span,
            )
    return None


def _job_ranks(workers: list[Worker]) -> frozenset | None:
    """Ranks the live ranked workers' jobs have (0..world_size-1, else the ranks seen); None
    when no live worker has a rank (nothing to check against)."""
    ranked = [w for w in workers if w.live and w.rank is not None]
    if not ranked:
        return None
    sizes = [w.world_size for w in ranked if w.world_size]
    if sizes:
        return frozenset(range(max(sizes)))
    return frozenset(w.rank for w in ranked)


def _line_span(src: Source, line: int) -> Span:
    text = src.line_text(line)
    indent = len(text) - len(text.lstrip())
    return Span(line - 1, indent, line - 1, len(text))
