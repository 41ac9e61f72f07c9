"""`raysleuth events [--since N] [--name NAME] [--json] [--export FILE]`: the cluster's timeline.

`raysleuth.event("step", step=i, loss=loss)` in any worker, crashes too, in one list by time;
`--export trace.json` writes the Trace Event format that chrome://tracing and Perfetto
(ui.perfetto.dev) open: one row per rank, so the rank that falls behind or stops stands out.
"""

from __future__ import annotations

import datetime
import json
from urllib.parse import quote

from raysleuth.shared.errors import SleuthError
from raysleuth.shared.privfiles import write_private
from raysleuth.shared.textsafe import lines, one_line


def _when(t) -> str:
    try:
        return datetime.datetime.fromtimestamp(float(t)).strftime("%H:%M:%S.%f")[:-3]
    except (TypeError, ValueError, OSError):
        return "?"


def _who(e: dict) -> str:
    if e.get("rank") is not None:
        return f"rank {e['rank']}"
    return f"pid {e.get('pid')}" if e.get("pid") else str(e.get("worker") or "?")[:8]


def format_list(events: list[dict]) -> str:
    if not events:
        return "No events yet. Call raysleuth.event(name, **fields) in remote code to add some."
    rows: list[tuple[str, ...]] = [("SEQ", "TIME", "WHO", "NAME", "FIELDS")]
    for e in sorted(events, key=lambda x: (x.get("time") or 0, x.get("seq") or 0)):
        fields = " ".join(f"{k}={v}" for k, v in (e.get("fields") or {}).items())
        # Each cell escaped (#37): an event's name or field value comes from any worker's code.
        cells = (e.get("seq"), _when(e.get("time")), _who(e), e.get("name"), fields[:120])
        rows.append(tuple(one_line(c) for c in cells))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    return "\n".join("  ".join(r[i].ljust(widths[i]) for i in range(4)) + "  " + r[4] for r in rows)


def to_trace(events: list[dict]) -> dict:
    """Trace Event format: instant events, a thread row per rank (workers without one by pid)."""
    trace = []
    rows: dict[str, int] = {}
    for e in sorted(events, key=lambda x: (x.get("time") or 0, x.get("seq") or 0)):
        who = _who(e)
        if who not in rows:
            rows[who] = e["rank"] if isinstance(e.get("rank"), int) else 100_000 + len(rows)
            meta = {"name": "thread_name", "ph": "M", "pid": 1, "tid": rows[who], "args": {"name": who}}
            trace.append(meta)
        trace.append(
            {
                "name": str(e.get("name")),
                "ph": "i",
                "s": "t",
                "ts": round(float(e.get("time") or 0) * 1e6),
                "pid": 1,
                "tid": rows[who],
                "args": dict(e.get("fields") or {}, seq=e.get("seq"), worker=e.get("worker")),
            }
        )
    return {"traceEvents": trace, "displayTimeUnit": "ms", "otherData": {"source": "raysleuth events"}}


def run_events(client, since: int, name: str | None, json_out: bool, export: str | None) -> int:
    path = f"/v1/events?since={since}" + (f"&name={quote(name, safe='')}" if name else "")
    events = client.get(path)
    if export:
        try:
            write_private(export, json.dumps(to_trace(events), default=str))
        except OSError as exc:
            raise SleuthError(
                f"Cannot write {export}: {exc.strerror}.", "Pass --export a path in a folder you can write."
            ) from exc
        print(
            f"wrote {len(events)} events to {one_line(export)} (open it in ui.perfetto.dev or chrome://tracing)"
        )
        return 0
    print(json.dumps(events, indent=1) if json_out else lines(format_list(events)))
    return 0
