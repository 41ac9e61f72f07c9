"""`raysleuth cases [ID] [--json]`: every failure the broker saw as a case, newest first, or one
case with its evidence."""

from __future__ import annotations

import datetime
import json
from urllib.parse import quote


def _when(t) -> str:
    try:
        return datetime.datetime.fromtimestamp(float(t)).strftime("%Y-%m-%d %H:%M:%S")
    except (TypeError, ValueError, OSError):
        return "?"


def format_list(cases: list[dict]) -> str:
    if not cases:
        return "No cases: nothing has failed, hung or drifted that the broker saw."
    rows = [
        (c.get("id") or "?", _when(c.get("time")), c.get("kind") or "?", c.get("summary") or "")
        for c in cases
    ]
    wid = max(len(r[0]) for r in rows)
    return "\n".join(f"{r[0].ljust(wid)}  {r[1]}  {r[2]:<10}  {r[3]}" for r in rows)


def format_detail(c: dict) -> str:
    out = [
        f"case {c.get('id')} · {c.get('kind')} · {_when(c.get('time'))} · job {c.get('job_id') or '?'}",
        c.get("summary") or "",
    ]
    if c.get("hint"):
        out.append(f"hint: {c['hint']}")
    ev = c.get("evidence") or {}
    if c.get("kind") == "crash" and ev.get("crash"):
        out.append(f"evidence: crash record {ev['crash']} (raysleuth crashes {ev['crash']})")
    elif c.get("kind") == "hang" and ev.get("text"):
        out += ["evidence: the stacks when it was found", ev["text"]]
    elif ev:
        out.append("evidence: " + json.dumps(ev, indent=1))
    return "\n".join(out)


def run_cases(client, case_id: str | None, json_out: bool) -> int:
    data = client.get(f"/v1/cases/{quote(case_id, safe='')}") if case_id else client.get("/v1/cases")
    if json_out:
        print(json.dumps(data, indent=1))
    else:
        print(format_detail(data) if case_id else format_list(data))
    return 0
