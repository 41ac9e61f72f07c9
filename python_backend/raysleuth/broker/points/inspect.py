"""The cross-rank tensor table: what `raysleuth.inspect(name, value, step)` sent from every rank,
kept per name and step (bounded), served flagged (`GET /v1/inspect`); and the same flags on
snapshot rows whose points recorded expressions (`GET /v1/snapshots/{id}`).

Rows arrive with the agents' event batches (the heartbeat); nothing here calls a worker.
"""

from __future__ import annotations

import collections
import time

from raysleuth.model.compare import DEFAULT_RTOL, flag_by, parse_rtol
from raysleuth.shared.errors import BadRequest

STEPS_KEEP = 200
"""Steps kept per inspect name (the oldest go first)."""

NAMES_KEEP = 500
"""Inspect names kept (the one updated longest ago goes first)."""

ROWS_KEEP = 200_000
"""Rows kept in all; past it the oldest step of the name with the most steps goes."""

ROW_FIELDS = (
    "name", "shape", "dtype", "device", "numel", "mean", "std", "min", "max", "norm", "nan", "inf",
    "hash", "error", "more", "global_shape", "local", "hash_error",
)  # fmt: skip
"""What a row keeps of an agent's summary."""


def rtol_of(query) -> float:
    """The `rtol` query parameter (default 1e-5); BadRequest with a hint when it is no number."""
    text = query.get("rtol")
    if text in (None, ""):
        return DEFAULT_RTOL
    try:
        return parse_rtol(text)
    except ValueError:
        raise BadRequest(f"'rtol' must be a non-negative number, not {text!r}", "E.g. ?rtol=1e-4.") from None


class Inspections:
    """Per inspect name, per step, per worker: the latest rows that worker sent."""

    def __init__(self, hub=None, clock=time.time) -> None:
        self.hub = hub
        self.clock = clock
        self._names: collections.OrderedDict = collections.OrderedDict()
        """name → OrderedDict(step key → {worker: [row]}), least recently updated name first."""
        self._steps: dict = {}
        """(name, step key) → the step as the agent sent it (an int, usually)."""
        self._rows = 0

    def __len__(self) -> int:
        return self._rows

    def add(self, who: dict, event: dict) -> dict:
        """One `inspect` event from an agent's batch; returns the light fields for the timeline."""
        fields = event.get("fields")
        f: dict = fields if isinstance(fields, dict) else {}
        name = str(f.get("name"))
        step = f.get("step")
        rank = f.get("rank") if f.get("rank") is not None else who.get("rank")
        t = event.get("t") if isinstance(event.get("t"), (int, float)) else self.clock()
        base = {"rank": rank, "worker": who.get("worker"), "pid": who.get("pid"), "step": step, "time": t}
        rows = [
            dict(base, **{k: r[k] for k in ROW_FIELDS if k in r})
            for r in f.get("rows") or ()
            if isinstance(r, dict)
        ]
        steps = self._names.pop(name, None) or collections.OrderedDict()
        self._names[name] = steps  # most recently updated last
        key = repr(step)
        self._steps[(name, key)] = step
        per_worker = steps.setdefault(key, {})
        self._rows += len(rows) - len(per_worker.get(who.get("worker"), ()))
        per_worker[who.get("worker")] = rows
        steps.move_to_end(key)
        self._trim(name)
        if self.hub is not None:
            self.hub.publish("inspect", {"name": name, "step": step, "rank": rank, "entries": len(rows)})
        return {"name": name, "step": step, "entries": len(rows)}

    def _drop_step(self, name: str, key: str) -> None:
        gone = self._names[name].pop(key)
        self._steps.pop((name, key), None)
        self._rows -= sum(len(rs) for rs in gone.values())
        if not self._names[name]:
            del self._names[name]

    def _trim(self, name: str) -> None:
        steps = self._names[name]
        while len(steps) > STEPS_KEEP:
            self._drop_step(name, next(iter(steps)))
        while len(self._names) > NAMES_KEEP:
            old = next(iter(self._names))
            for key in list(self._names[old]):
                self._drop_step(old, key)
        while self._rows > ROWS_KEEP and self._names:
            biggest = max(self._names, key=lambda n: len(self._names[n]))
            self._drop_step(biggest, next(iter(self._names[biggest])))

    # --- reading ----------------------------------------------------------------------------

    def query(
        self, name: str | None = None, step: str | None = None, rtol: float = DEFAULT_RTOL
    ) -> list[dict]:
        """Rows of `name` (an inspect name, or one entry's full name; None: every name) at `step`
        (its text as sent, e.g. "12"; None: each name's latest; "all": every step kept),
        one per rank and entry, each with `differs` and `why`; sorted by name, step, rank."""
        names = [name] if name in self._names else list(self._names) if name is None else None
        entry = None
        if names is None:  # an entry of a collection: "model.fc.weight" of inspect("model", m)
            names, entry = list(self._names), name
        out: list[dict] = []
        for n in names:
            steps = self._names[n]
            if step is None:
                keys = [next(reversed(steps))]
            elif step == "all":
                keys = list(steps)
            else:
                keys = [k for k in steps if str(self._steps.get((n, k))) == step]
            for key in keys:
                for rows in steps[key].values():
                    out.extend(dict(r) for r in rows if entry is None or r.get("name") == entry)
        flag_by(out, lambda r: (r.get("name"), repr(r.get("step"))), rtol)
        out.sort(key=lambda r: (str(r.get("name")), _order(r.get("step")), _order(r.get("rank"))))
        return out

    def names(self) -> list[dict]:
        """[{name, steps, last_step}] of what is kept, most recently updated first."""
        return [
            {"name": n, "steps": len(s), "last_step": self._steps.get((n, next(reversed(s))))}
            for n, s in reversed(self._names.items())
        ]


def _order(x) -> tuple:
    return (x is None, not isinstance(x, (int, float)), x if isinstance(x, (int, float)) else str(x))


def flag_snapshot_rows(rows: list[dict], rtol: float = DEFAULT_RTOL) -> list[dict]:
    """Snapshot rows with their expressions' values flagged across ranks: each value gets
    `differs` and `why` (compared with the same capture, first or n-th, of the other workers),
    each row `differs` when one of its values does. Rows without values are returned as they are."""
    out = [dict(r, values=[dict(v) for v in r["values"]]) if r.get("values") else r for r in rows]
    nth: dict = collections.Counter()
    values: list[dict] = []
    for row in out:
        if not row.get("values"):
            continue
        i = nth[row.get("worker")]
        nth[row.get("worker")] += 1
        for v in row["values"]:
            v["_capture"] = i
            values.append(v)
    flag_by(values, lambda v: (v["_capture"], v.get("name")), rtol)
    for v in values:
        del v["_capture"]
    for row in out:
        if row.get("values"):
            row["differs"] = any(v.get("differs") for v in row["values"])
    return out
