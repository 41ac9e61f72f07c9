"""`raysleuth cases [ID] [--json]`: every failure the broker saw as a case, newest first, or one
case with its evidence."""

from __future__ import annotations

import datetime
import json
from urllib.parse import quote

from raysleuth.shared.textsafe import lines, one_line


def _when(t) -> str:
    try:
        return datetime.datetime.fromtimestamp(float(t)).strftime("%Y-%m-%d %H:%M:%S")
    except (TypeError, ValueError, OSError):
        return "?"


def format_list(cases: list[dict]) -> str:
    if not cases:
        return "No cases: nothing has failed, hung or drifted that the broker saw."
    rows = [
        (
            one_line(c.get("id") or "?"),
            _when(c.get("time")),
            one_line(c.get("kind") or "?"),
            one_line(c.get("summary") or ""),  # a summary's newline must not forge a row (#37)
        )
        for c in cases
    ]
    wid = max(len(r[0]) for r in rows)
    return "\n".join(f"{r[0].ljust(wid)}  {r[1]}  {r[2]:<10}  {r[3]}" for r in rows)


def format_detail(c: dict) -> str:
    out = [
        f"case {one_line(c.get('id'))} · {one_line(c.get('kind'))} · {_when(c.get('time'))}"
        f" · job {one_line(c.get('job_id') or '?')}",
        one_line(c.get("summary") or ""),  # one line by design: a newline in it forges one
    ]
    if c.get("hint"):
        out.append(f"hint: {lines(c['hint'])}")
    ev = c.get("evidence") or {}
    if c.get("kind") == "crash" and ev.get("crash"):
        crash = one_line(ev["crash"])
        out.append(f"evidence: crash record {crash} (raysleuth crashes {crash})")
    elif c.get("kind") == "hang" and ev.get("text"):
        out += ["evidence: the stacks when it was found", lines(ev["text"])]
    elif ev:
        out.append("evidence: " + json.dumps(ev, indent=1))
    return "\n".join(out)


def run_cases(client, case_id: str | None, json_out: bool) -> int:
    data = client.get(f"/v1/cases/{quote(case_id, safe='')}") if case_id else client.get("/v1/cases")
    if json_out:
        print(json.dumps(data, indent=1))
    else:
        print(lines(format_detail(data) if case_id else format_list(data)))
    return 0
