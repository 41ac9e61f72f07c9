"""First divergence across ranks (issue 26): each rank's summaries of the watched expressions, per
pass of a line, lined up by pass count (or by a step local); the first pass where a rank differs
from the majority names that rank, the expression, the statistic and the last pass all agreed.
Pure data: the broker feeds rows in, tests feed them too.
"""

from __future__ import annotations

from collections.abc import Callable

from raysleuth.model.compare import DEFAULT_RTOL, flag_group

KEEP_PASSES = 256
"""Passes kept while waiting for every rank to get there (the oldest are dropped)."""

KEEP_DONE = 4096
"""Keys of compared passes remembered (a late row of one is ignored); the oldest are forgotten,
so a watch that runs for days holds no more than this."""


class DivergenceFinder:
    def __init__(
        self,
        rtol: float = DEFAULT_RTOL,
        ranks: set[int] | None = None,
        live: Callable[[], set[int]] | None = None,
    ) -> None:
        self.rtol = rtol
        self.expected = set(ranks) if ranks else None
        """The ranks in scope, when the watch named them."""
        self.live = live
        """The ranks of the job that live now (the broker's table); a pass is compared once each
        of them (in scope) got there. Without it: the ranks that sent a row so far."""
        self.seen: set[int] = set()
        self.passes: dict[object, dict[int, dict]] = {}
        self.done: dict = {}
        """Keys of the passes compared, oldest first (an ordered set of at most KEEP_DONE)."""
        self.last_agreed: object = None
        """The key (pass count, or step) of the last pass where all agreed."""
        self.last_agreed_rows: dict[int, dict] = {}
        """That pass's rows by rank: their `pass` and `step` (ranks may count passes differently)."""
        self.divergence: dict | None = None
        self.compared = 0

    def ranks(self, live: set[int] | None = None) -> set[int]:
        """The ranks a pass waits for; `live`: the job's live ranks when the caller read them."""
        if live is None and self.live is not None:
            live = self.live()
        if self.expected is not None:
            return self.expected & live if live else self.expected
        return live if live else self.seen

    def add(self, row: dict, key) -> dict | None:
        """One rank's row at pass `key`; the divergence once it is found (then only once)."""
        rank = row.get("rank")
        if not isinstance(rank, int) or self.divergence is not None or key in self.done:
            return None
        if self.expected is not None and rank not in self.expected:
            return None
        live = self.live() if self.live is not None else None
        if live and rank not in live:
            return None
        self.seen.add(rank)
        self.passes.setdefault(key, {})[rank] = row
        while len(self.passes) > KEEP_PASSES:
            self.passes.pop(next(iter(self.passes)))
        want = self.ranks(live)  # the table is read once per row
        for k in sorted(self.passes, key=_order):
            got = self.passes[k]
            if len(want) < 2 or not want <= set(got):
                break  # pass `k` waits for a rank; later passes wait for it too
            del self.passes[k]
            self.done[k] = None
            if len(self.done) > KEEP_DONE:
                del self.done[next(iter(self.done))]
            self.compared += 1
            found = self._compare(k, got)
            if found is not None:
                self.divergence = found
                return found
            self.last_agreed, self.last_agreed_rows = k, got
        return None

    def _compare(self, key, rows: dict[int, dict]) -> dict | None:
        entries: dict[str, list[dict]] = {}
        for rank in sorted(rows):
            for v in rows[rank].get("values") or []:
                entries.setdefault(str(v.get("name") or v.get("expression")), []).append(dict(v, rank=rank))
        for name, group in entries.items():
            flag_group(group, self.rtol)
            odd = [r for r in group if r.get("differs")]
            if odd and len(odd) * 2 < len(group):
                first = rows[odd[0]["rank"]]
                agreed = self.last_agreed_rows.get(odd[0]["rank"], {})
                return {
                    "pass": first.get("pass")
                    if isinstance(key, int) and first.get("pass") is not None
                    else key,
                    "step": first.get("step"),
                    "ranks": [r["rank"] for r in odd],
                    "expression": str(odd[0].get("expression") or name),
                    "entry": name,
                    "why": odd[0].get("why"),
                    "values": {str(r["rank"]): {k: r.get(k) for k in _SHOWN if k in r} for r in group},
                    "last_agreed_pass": agreed.get("pass", self.last_agreed),
                    "last_agreed_step": agreed.get("step"),
                }
        return None


_SHOWN = ("shape", "dtype", "norm", "mean", "std", "min", "max", "hash", "value", "error")


def _order(key):
    return (0, key, "") if isinstance(key, (int, float)) else (1, 0, str(key))
