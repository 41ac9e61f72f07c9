"""`raysleuth doctor [--json]`: the report of every node's checks (raysleuth/probes/checks.py, run in
each node's relay) and the broker's own, as text or JSON; a `fail` makes the command exit 1.
"""

from __future__ import annotations

import json

from raysleuth.shared.textsafe import one_line

MARK = {"ok": "ok  ", "info": "info", "warn": "WARN", "fail": "FAIL"}


def format_report(report: dict) -> str:
    lines = []
    sections = [("broker", report.get("broker") or [])] + [
        (f"node {n.get('node_ip')} ({str(n.get('node_id'))[:6]})", n.get("checks") or [])
        for n in report.get("nodes") or []
    ]
    for title, checks in sections:
        lines.append(one_line(title))
        for c in checks:  # each check's text escaped: a node's relay wrote it (#37)
            lines.append(one_line(f"  [{MARK.get(c['status'], c['status'])}] {c['check']}: {c['detail']}"))
            if c.get("hint") and c["status"] in ("warn", "fail"):
                lines.append(one_line(f"         hint: {c['hint']}"))
    counts = {s: sum(c["status"] == s for _, cs in sections for c in cs) for s in ("fail", "warn")}
    lines.append(
        "all good"
        if report.get("ok") and not counts["warn"]
        else f"{counts['fail']} failed, {counts['warn']} warnings"
    )
    return "\n".join(lines)


def run_doctor(client, json_out: bool) -> int:
    report = client.get("/v1/doctor")
    print(json.dumps(report, indent=1) if json_out else format_report(report))
    return 0 if report.get("ok") else 1
