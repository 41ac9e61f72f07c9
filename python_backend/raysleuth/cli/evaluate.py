"""`raysleuth evaluate EXPR [--ranks R] [--force]` on every paused worker, `raysleuth kill WORKER`
to end one an evaluate holds, and the question asked before code the broker would refuse as
unbounded is sent anyway (#37): y/N on a terminal, else an error that names `--force`."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable

from raysleuth.shared.errors import BadRequest, SleuthError
from raysleuth.shared.textsafe import one_line


def code_of_entry(bp: dict) -> list[str]:
    """The Python a breakpoint entry ({condition, logMessage}) runs in the workers."""
    from raysleuth.model.point import log_expressions
    from raysleuth.model.scope import split_condition

    out = []
    cond = bp.get("condition")
    if isinstance(cond, str) and cond.strip():
        try:
            rest = split_condition(cond)[1]
        except SleuthError:
            rest = None  # the broker says what is wrong with it
        if rest:
            out.append(rest)
    msg = bp.get("logMessage")
    if isinstance(msg, str):
        out += log_expressions(msg)
    return out


def confirm_unbounded(expressions: Iterable[str | None], force: bool, stdin=None, out=None) -> bool:
    """Whether to send with `force`: False when nothing is flagged; True with --force or a "y" on
    a terminal; else an error (not on a terminal: one that names --force)."""
    from raysleuth.model.unbounded import unbounded_reason

    flagged = [(e, r) for e in expressions if e and (r := unbounded_reason(e))]
    if not flagged:
        return False
    if force:
        return True
    expr, reason = flagged[0]
    stdin = stdin if stdin is not None else sys.stdin
    out = out if out is not None else sys.stderr
    said = f"{one_line(expr[:120])!s} may never finish: {one_line(reason)}"
    if not (stdin.isatty() and out.isatty()):
        raise BadRequest(
            f"Not sent: {said}.",
            "It would hold the worker's GIL until it ends (only ending the worker stops it); pass "
            "--force to send it anyway.",
        )
    out.write(f"{said}. It would hold the worker until it ends. Send it anyway? [y/N] ")
    out.flush()
    if stdin.readline().strip().lower() in ("y", "yes"):
        return True
    raise SleuthError("Not sent.", None)


def busy_text(busy: dict) -> str:
    """` busy (evaluate since 12:03:04)` for the list's STATE column."""
    since = busy.get("since")
    when = time.strftime("%H:%M:%S", time.localtime(since)) if isinstance(since, (int, float)) else "?"
    return f" busy ({one_line(busy.get('what') or '?')} since {when})"


def run_evaluate(client, args) -> int:
    body: dict = {"expression": args.expression}
    if args.ranks:
        from raysleuth.model.scope import parse_ranks

        body["ranks"] = sorted(parse_ranks(args.ranks))
    if confirm_unbounded([args.expression], args.force):
        body["force"] = True
    rows = client.post("/v1/evaluate", body)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    if not rows:
        print("No paused worker to evaluate in.")
        return 0
    for r in rows:
        who = f"[rank {r['rank']}]" if r.get("rank") is not None else f"[pid {r.get('pid')}]"
        said = r["value"] if "value" in r else f"error: {r.get('error')}"
        print(one_line(f"{who} {said}"))
    busy = [r["worker"] for r in rows if r.get("busy")]
    if busy:
        print(f"{len(busy)} worker(s) busy: `raysleuth kill {busy[0][:8]}` ends one.")
    return 0


def run_kill(client, args) -> int:
    if not args.yes:
        if not (sys.stdin.isatty() and sys.stderr.isatty()):
            raise BadRequest(
                f"Not ended: ending worker {one_line(args.worker)} fails its task or restarts its actor.",
                "Pass --yes to end it.",
            )
        sys.stderr.write(f"End worker {one_line(args.worker)} (SIGKILL)? [y/N] ")
        sys.stderr.flush()
        if sys.stdin.readline().strip().lower() not in ("y", "yes"):
            raise SleuthError("Not ended.", None)
    from urllib.parse import quote

    res = client.post(f"/v1/workers/{quote(args.worker, safe='')}/kill", {})
    print(one_line(f"Ended worker {res.get('worker', '')[:8]} (pid {res.get('pid')})."))
    return 0


def add_parsers(sub, client_opts, cmd_evaluate, cmd_kill) -> None:
    ev = sub.add_parser("evaluate", help="evaluate an expression in every paused worker")
    ev.add_argument("expression", help="a Python expression, run in each paused worker's frame")
    ev.add_argument("--ranks", help="only these ranks: 0,2-3")
    ev.add_argument("--force", action="store_true", help="send it even if it looks unbounded")
    ev.add_argument("--json", action="store_true", help="print the HTTP API's JSON")
    client_opts(ev)
    ev.set_defaults(fn=cmd_evaluate)
    k = sub.add_parser("kill", help="end a worker's process (one an evaluate holds busy)")
    k.add_argument("worker", help="worker id (or a unique prefix of it)")
    k.add_argument("--yes", action="store_true", help="do not ask")
    client_opts(k)
    k.set_defaults(fn=cmd_kill)
