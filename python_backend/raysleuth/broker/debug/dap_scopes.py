"""Rank scopes in a DAP session's `setBreakpoints`: debugpy gets the plain conditions of this
worker's points only; the client gets an answer for every point, in its order."""

from __future__ import annotations

from raysleuth.model.scope import split_condition
from raysleuth.shared.errors import SleuthError


def scope_breakpoints(args: dict, worker) -> tuple[dict, list]:
    """Rank scopes are ours: debugpy gets the plain condition, and only this worker's points.

    Returns the arguments for debugpy and, per requested breakpoint, None (sent on) or the
    unverified answer for one that was held back (outside this worker's scope, or a bad scope).
    """
    out: list[dict] = []
    kept: list[dict | None] = []
    for bp in list(args.get("breakpoints") or []):
        try:
            scope, rest = split_condition(bp.get("condition"))
        except SleuthError as exc:
            kept.append({"verified": False, "line": bp.get("line"), "message": f"Ray Sleuth: {exc.message}"})
            continue
        if scope.match(worker) is False:
            kept.append(
                {
                    "verified": False,
                    "line": bp.get("line"),
                    "message": f"Ray Sleuth: [{scope.text()}] does not include this worker",
                }
            )
            continue
        bp = dict(bp)
        if rest:
            bp["condition"] = rest
        else:
            bp.pop("condition", None)
        out.append(bp)
        kept.append(None)
    args = dict(args, breakpoints=out)
    args.pop("lines", None)  # the legacy form would bring the held-back lines back
    return args, kept


def merge_scoped(kept: list, answered: list) -> list:
    """The client's breakpoints in its order: debugpy's answers with ours in the gaps."""
    it = iter(answered)
    return [k if k is not None else next(it, {"verified": False}) for k in kept]
