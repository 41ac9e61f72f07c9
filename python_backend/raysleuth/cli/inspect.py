"""`raysleuth inspect [NAME] [--step S] [--rtol R] [--json]`: the cross-rank table of what
`raysleuth.inspect(name, value, step)` recorded, one row per rank and entry, the ranks that
differ from the majority marked with `!` and the reason.
"""

from __future__ import annotations

import json
from urllib.parse import urlencode

from raysleuth.shared.textsafe import one_line

COLUMNS = (
    "NAME",
    "STEP",
    "RANK",
    "SHAPE",
    "DTYPE",
    "MEAN",
    "STD",
    "MIN",
    "MAX",
    "NORM",
    "NAN",
    "INF",
    "HASH",
)


def _num(x) -> str:
    if isinstance(x, bool) or x is None:
        return "-" if x is None else str(x)
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        return f"{x:.6g}"
    return str(x)


def _cells(r: dict) -> list[str]:
    shape = r.get("shape")
    cells = [
        str(r.get("name")),
        _num(r.get("step")),
        _num(r.get("rank")),
        "[" + ", ".join(str(d) for d in shape) + "]" if isinstance(shape, list) else "-",
        str(r.get("dtype") or "-"),
        *(_num(r.get(k)) for k in ("mean", "std", "min", "max", "norm", "nan", "inf")),
        str(r.get("hash") or "-")[:8],
    ]
    return [one_line(c) for c in cells]  # a name or dtype from a worker: no ESC, no newline (#37)


def format_table(rows: list[dict]) -> str:
    if not rows:
        return (
            "No inspect rows yet. Call raysleuth.inspect(name, tensor, step) in remote code, "
            "or capture expressions with POST /v1/snapshots."
        )
    table = [list(COLUMNS)] + [_cells(r) for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(COLUMNS))]
    lines = []
    for i, row in enumerate(table):
        mark = "  " if i == 0 or not rows[i - 1].get("differs") else "! "
        text = mark + "  ".join(
            c.rjust(w) if 4 < j < 12 else c.ljust(w) for j, (c, w) in enumerate(zip(row, widths, strict=True))
        )
        lines.append(text.rstrip())
    differs = [r for r in rows if r.get("differs")]
    if differs:
        lines.append("")
        lines += [
            one_line(f"! rank {r.get('rank')} {r.get('name')} step {r.get('step')}: {r.get('why')}")
            for r in differs
        ]
    else:
        lines.append(f"\nall ranks agree ({len(rows)} rows)")
    return "\n".join(lines)


def run_inspect(client, name: str | None, step: str | None, rtol: float | None, json_out: bool) -> int:
    params = {k: v for k, v in (("name", name), ("step", step), ("rtol", rtol)) if v is not None}
    rows = client.get("/v1/inspect" + ("?" + urlencode(params) if params else ""))
    print(json.dumps(rows, indent=1) if json_out else format_table(rows))
    return 0
