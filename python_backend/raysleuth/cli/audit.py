"""`raysleuth audit [--json] [--limit N]`: the broker's audit log (`GET /v1/audit`), oldest first:
every action that ran code in a worker, who asked, what and where. Every field is escaped: an
expression or a name is shown, never obeyed by the terminal."""

from __future__ import annotations

import json
import time

from raysleuth.shared.textsafe import one_line


def _client(entry: dict) -> str:
    c = entry.get("client") or {}
    if not isinstance(c, dict):
        return one_line(c)
    parts = [f"uid {c['uid']}" if c.get("uid") is not None else "", f"pid {c['pid']}" if c.get("pid") else ""]
    who = ", ".join(p for p in parts if p)
    return one_line(who or c.get("address") or "?")


def _where(entry: dict) -> str:
    if entry.get("path"):
        scope = f" [{entry['scope']}]" if entry.get("scope") else ""
        return f"{entry['path']}:{entry.get('line')}{scope}"
    ranks = [r for r in entry.get("ranks") or [] if r is not None]
    workers = entry.get("workers") or []
    if ranks:
        return "ranks " + ",".join(map(str, ranks))
    return ",".join(str(w)[:8] for w in workers) or "-"


def format_entry(entry: dict) -> str:
    t = entry.get("time")
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if isinstance(t, (int, float)) else "?"
    code = entry.get("expression")
    if code is None and entry.get("expressions"):
        code = "; ".join(map(str, entry["expressions"]))
    force = " (forced)" if entry.get("force") else ""
    what = f"  {code!s}" if code else ""
    return one_line(f"{when}  {entry.get('action')}{force}  {_client(entry)}  {_where(entry)}{what}")


def run_audit(client, args) -> int:
    entries = client.get(f"/v1/audit?limit={int(args.limit)}")
    if args.json:
        print(json.dumps(entries, indent=1))
    elif not entries:
        print("The audit log is empty: nothing has run code in a worker through this broker yet.")
    else:
        print("\n".join(format_entry(e) for e in entries if isinstance(e, dict)))
    return 0


def add_audit_parser(sub, client_opts, cmd) -> None:
    au = sub.add_parser("audit", help="what ran code in the workers, who asked (the broker's audit log)")
    au.add_argument("--json", action="store_true", help="print the HTTP API's JSON")
    au.add_argument("--limit", type=int, default=100, help="the last N entries (default 100)")
    client_opts(au)
    au.set_defaults(fn=cmd)
