"""`raysleuth break` and `raysleuth logs`: cluster breakpoints and logpoint lines from a terminal."""

from __future__ import annotations

import json
import os
import time

from raysleuth.model.scope import format_ranks, parse_ranks
from raysleuth.shared.errors import BadRequest
from raysleuth.shared.textsafe import one_line

ARMED_WAIT_S = 5.0
"""How long `break` waits to report how many workers armed the new breakpoint."""

OWNER = "cli"
"""The owner of the points set from a terminal: an editor's edits in the same file leave them."""


def parse_location(text: str) -> tuple[str, int]:
    """`train.py:42` → ("/abs/train.py", 42)."""
    path, sep, line = text.rpartition(":")
    if not sep or not path or not line.isdigit() or int(line) < 1:
        raise BadRequest(f"{text!r} is not FILE:LINE", "Write it like train.py:42.")
    return os.path.abspath(path), int(line)


def _entry(bp: dict) -> dict:
    return {
        k: bp.get(k)
        for k in ("line", "condition", "hitCondition", "logMessage", "ranks")
        if bp.get(k) is not None
    }


def describe(bp: dict) -> str:
    parts = [f"{bp['path']}:{bp['line']}"]
    if bp.get("scope"):
        parts.append(f"[{bp['scope']}]")
    cond = bp.get("condition") or ""
    rest = cond[cond.rfind("]") + 1 :].strip() if cond.startswith("[") else cond
    if rest:
        parts.append(f"if {rest}")
    if bp.get("hitCondition"):
        parts.append(f"hit {bp['hitCondition']}")
    if bp.get("logMessage"):
        parts.append(f"log {bp['logMessage']!r}")
    owner = bp.get("owner")
    by = f", set by {owner}" if owner and owner != OWNER else ""
    # One line whatever the cluster sent: a path's or message's newline or ESC escaped (#37).
    return one_line(
        " ".join(str(p) for p in parts) + f"  (armed on {bp.get('armed', 0)}{armed_where(bp)}{by})"
    )


def armed_where(bp: dict) -> str:
    """`: ranks 1,3` (or `: pid 812` for workers without a rank) from the listing's armed_on."""
    on = bp.get("armed_on") or []
    if not on:
        return ""
    ranks = [w["rank"] for w in on if w.get("rank") is not None]
    parts = [f"rank{'s' if len(ranks) > 1 else ''} {format_ranks(ranks)}"] if ranks else []
    parts += [f"pid {w.get('pid')}" for w in on if w.get("rank") is None]
    return ": " + ", ".join(parts)


def check_local(path: str, line: int) -> str | None:
    """BadRequest for a location that cannot be a breakpoint here (a folder, a line past the end
    of the file); a note when the file is not on this host (it may be on the workers' only)."""
    if os.path.isdir(path):
        raise BadRequest(f"{path} is a folder, not a file.", "Give FILE:LINE of a Python file.")
    try:
        with open(path, "rb") as f:
            lines = sum(1 for _ in f)
    except FileNotFoundError:
        return f"{path} is not on this host: the point arms in workers that load a file of that path."
    except OSError as exc:
        return f"{path} cannot be read here ({exc.strerror}): the point arms in workers that load it."
    if line > lines:
        raise BadRequest(
            f"Line {line} is past the end of {path} ({lines} lines).", "Give a line of the file."
        )
    return None


def run_break(client, args) -> int:
    if args.list:
        bps = client.breakpoints()
        if args.json:
            print(json.dumps(bps, indent=1))
        else:
            print("\n".join(describe(b) for b in bps) if bps else "No cluster breakpoints.")
        return 0
    if args.clear:
        everyone = getattr(args, "all", False)
        if args.location:
            path = os.path.abspath(args.location.rpartition(":")[0] or args.location)
            owners = {b["owner"] for b in client.breakpoints() if b["path"] == path} if everyone else {OWNER}
            for owner in sorted(owners):
                client.set_breakpoints(path, [], owner=owner)
        else:
            res = client.delete("/v1/breakpoints" if everyone else f"/v1/breakpoints?owner={OWNER}")
            whose = "" if everyone else " set from the terminal"
            print(f"Cleared {res.get('deleted', 0)} breakpoint(s){whose}.")
            return 0
        print("Cleared.")
        return 0
    if not args.location:
        raise BadRequest(
            "Say where: raysleuth break FILE:LINE.", "Or --list to see the cluster's breakpoints."
        )
    path, line = parse_location(args.location)
    note = None if args.remove else check_local(path, line)
    keep = [
        _entry(b)
        for b in client.breakpoints()
        if b["path"] == path and b["line"] != line and b.get("owner", OWNER) == OWNER
    ]
    if not args.remove:
        new: dict = {"line": line}
        if args.cond:
            new["condition"] = args.cond
        if getattr(args, "group", None):
            new["condition"] = f"[group {args.group}] {new.get('condition') or ''}".strip()
        if args.ranks:
            new["ranks"] = sorted(parse_ranks(args.ranks))
        if args.hit:
            new["hitCondition"] = args.hit
        if args.log:
            new["logMessage"] = args.log
        keep.append(new)
    from raysleuth.cli.evaluate import code_of_entry, confirm_unbounded

    force = confirm_unbounded((e for b in keep for e in code_of_entry(b)), getattr(args, "force", False))
    sure = {"force": True} if force else {}
    res = client.set_breakpoints(path, keep, root=os.getcwd(), owner=OWNER, **sure)
    if args.remove:
        print(f"Removed {one_line(path)}:{line}.")
        return 0
    mine = next(b for b in res["breakpoints"] if b["line"] == line)
    deadline = time.monotonic() + ARMED_WAIT_S
    # Until every live worker took the new set (then the count is final), or at least one armed
    # it where the broker cannot tell (an older broker without `pending`).
    while time.monotonic() < deadline and (
        mine.get("pending", 0) > 0 or ("pending" not in mine and mine.get("armed", 0) == 0)
    ):
        time.sleep(0.2)
        mine = next((b for b in client.breakpoints() if b["id"] == mine["id"]), mine)
    if args.json:
        print(json.dumps(mine, indent=1))
    else:
        print(describe(mine))
        if not mine.get("armed"):
            print(one_line(note or f"No worker has loaded {path} yet: the point arms in each one that does."))
    if args.follow:
        return follow_logs(client, json_out=args.json)
    return 0


def format_log(rec: dict) -> str:
    who = f"[rank {rec['rank']}]" if rec.get("rank") is not None else f"[pid {rec.get('pid')}]"
    return one_line(f"{who} {rec.get('message')}")  # one record, one line: a newline forges no rank


def follow_logs(client, json_out: bool = False, follow: bool = True, poll_s: float = 0.5) -> int:
    since = 0
    while True:
        for rec in client.get(f"/v1/logs?since={since}"):
            since = max(since, rec["seq"])
            print(json.dumps(rec) if json_out else format_log(rec), flush=True)
        if not follow:
            return 0
        time.sleep(poll_s)


__all__ = ["format_ranks", "run_break", "follow_logs", "parse_location"]
