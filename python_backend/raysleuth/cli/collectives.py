"""`raysleuth collectives [--job J] [--json]`: the collectives queue (issue 27): per process group,
each rank's last collective enqueued, started and completed; the rank the others wait for marked."""

from __future__ import annotations

import json
from urllib.parse import urlencode

from raysleuth.shared.textsafe import lines, one_line


def _seq(value) -> str:
    return "-" if value is None or value == -1 else str(value)


def format_queue(rows: list[dict]) -> str:
    if not rows:
        return "No collectives: no worker has a torch.distributed process group with a flight recorder."
    table: list[tuple[str, ...]] = [("GROUP", "RANK", "ENQUEUED", "STARTED", "COMPLETED", "OP", "")]
    for r in rows:
        rank = "-" if r.get("rank") is None else str(r["rank"])
        seqs = (_seq(r.get("last_enqueued")), _seq(r.get("last_started")), _seq(r.get("last_completed")))
        late = "<- behind" if r.get("behind") else ""
        table.append((one_line(r.get("group")), rank, *seqs, one_line(r.get("op") or "?"), late))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in table
    )


def run_collectives(client, job: str | None, json_out: bool) -> int:
    rows = client.get("/v1/collectives" + (f"?{urlencode({'job': job})}" if job else ""))
    print(json.dumps(rows, indent=1) if json_out else lines(format_queue(rows)))
    return 0
