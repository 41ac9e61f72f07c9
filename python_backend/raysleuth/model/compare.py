"""Which ranks differ from the majority, for one value seen on several ranks (an inspect name at
one step, a snapshot expression): by content hash first, by relative tolerance where there is
no majority hash. Pure data, no I/O: the broker and the tests use it.
"""

from __future__ import annotations

import collections
import math
import statistics
from collections.abc import Callable, Iterable

DEFAULT_RTOL = 1e-5
"""Relative difference on the norm or the mean over which a rank is flagged."""


def _majority(values: list) -> tuple[object, int] | None:
    """The value more than half of `values` share (None values do not vote), with its count."""
    votes = [v for v in values if v is not None]
    if not votes:
        return None
    value, count = collections.Counter(votes).most_common(1)[0]
    return (value, count) if count * 2 > len(votes) else None


def _place(row: dict) -> str | None:
    """Host or device kind of a row's tensor ("cpu", "cuda"): each hashes its own way."""
    device = row.get("device")
    return str(device).split(":")[0] if device else None


def _relative(x, ref, scale) -> float | None:
    if not isinstance(x, (int, float)) or not isinstance(ref, (int, float)):
        return None
    return abs(x - ref) / scale if scale > 0 else (0.0 if x == ref else math.inf)


def _median(rows: list[dict], key: str):
    xs = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
    return statistics.median(xs) if xs else None


def flag_group(rows: list[dict], rtol: float = DEFAULT_RTOL) -> None:
    """Set `differs` (bool) and `why` (text or None) on each row of one group (one per rank).

    A row differs when its hash is not the majority's, or its shape or dtype is not, or it has
    an `error` where most have statistics, or (with no majority hash: each rank holds other
    data) its norm or mean is over `rtol` away from the ranks' median; the mean is measured
    against the larger of |mean| and the RMS, as a gradient's mean sits near 0. Rows that
    carry only a `value` text compare that text.
    """
    for r in rows:
        r["differs"], r["why"] = False, None
    if len(rows) < 2:
        return
    if all("hash" not in r and "value" in r for r in rows):
        maj = _majority([r.get("value") for r in rows])
        for r in rows:
            if maj is not None and r.get("value") != maj[0]:
                r["differs"], r["why"] = True, f"value differs from the majority ({maj[1]} of {len(rows)})"
        return
    by_hash = _majority([r.get("hash") for r in rows])
    shape = _majority([repr(r.get("shape")) for r in rows])
    dtype = _majority([r.get("dtype") for r in rows])
    place = _majority([_place(r) for r in rows])
    errors = _majority([bool(r.get("error")) for r in rows])
    ref_norm, ref_mean = _median(rows, "norm"), _median(rows, "mean")
    rms = ref_norm / math.sqrt(max(1, int(_median(rows, "numel") or 1))) if ref_norm is not None else 0.0
    for r in rows:
        why = []
        if shape is not None and repr(r.get("shape")) != shape[0]:
            why.append(f"shape {r.get('shape')}")
        if dtype is not None and r.get("dtype") != dtype[0]:
            why.append(f"dtype {r.get('dtype')}")
        if place is not None and _place(r) not in (None, place[0]):
            why.append(f"device {r.get('device')}, the majority on {place[0]} (hashed another way there)")
        if r.get("error") and errors is not None and not errors[0]:
            why.append(f"no statistics ({r['error']})")
        if by_hash is not None:
            if r.get("hash") != by_hash[0]:
                why.append(f"hash differs from the majority ({by_hash[1]} of {len(rows)})")
        else:
            for key, ref, scale in (
                ("norm", ref_norm, abs(ref_norm or 0.0)),
                ("mean", ref_mean, max(abs(ref_mean or 0.0), rms)),
            ):
                rel = _relative(r.get(key), ref, scale)
                if rel is not None and rel > rtol:
                    why.append(f"{key} {rel:.1e} relative off the median (rtol {rtol:g})")
        if why:
            r["differs"], r["why"] = True, "; ".join(why)


def flag_by(rows: Iterable[dict], key: Callable[[dict], object], rtol: float = DEFAULT_RTOL) -> None:
    """`flag_group` on each group of `rows` that share `key(row)`."""
    groups: dict = collections.defaultdict(list)
    for r in rows:
        groups[key(r)].append(r)
    for g in groups.values():
        flag_group(g, rtol)


def parse_rtol(text) -> float:
    """A query's `rtol`: a non-negative number; ValueError otherwise."""
    value = float(text)
    if not math.isfinite(value) or value < 0:
        raise ValueError(text)
    return value
