"""`raysleuth group [NAME] [--ranks R | --workers W | --expression E] [--job J] [--delete] [--json]`:
rank groups (issue 27). No name lists them; a name with a definition makes or replaces that group;
a name alone shows it; `--delete` removes it. A breakpoint scope `[group NAME]` then stops only its
members."""

from __future__ import annotations

import json
from urllib.parse import quote

from raysleuth.model.scope import format_ranks, parse_ranks
from raysleuth.shared.errors import BadRequest, NotFound
from raysleuth.shared.textsafe import one_line


def format_groups(groups: list[dict]) -> str:
    lines: list[tuple[str, ...]] = [("GROUP", "RANKS", "WORKERS", "DEFINED BY")]
    for g in groups:
        ranks = format_ranks(g.get("ranks") or ()) or "-"
        how = g.get("expression") or ("job " + g["job_id"] if g.get("job_id") else "")
        lines.append((one_line(g["name"]), one_line(ranks), str(len(g.get("workers") or ())), one_line(how)))
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines
    )


def run_group(client, args) -> int:
    if not args.name:
        groups = client.get("/v1/groups")
        print(json.dumps(groups, indent=1) if args.json else format_groups(groups))
        return 0
    where = "/v1/groups/" + quote(args.name, safe="")
    if args.delete:
        client.request("DELETE", where)
        print(f"group {one_line(args.name)} deleted")
        return 0
    given = [o for o in (args.ranks, args.workers, args.expression) if o is not None]
    if len(given) > 1:
        raise BadRequest("a group is one of --ranks, --workers or --expression", "Give one of them.")
    body: dict = {}
    if args.ranks is not None:
        body["ranks"] = sorted(parse_ranks(args.ranks))
    if args.workers is not None:
        body["workers"] = [w.strip() for w in args.workers.split(",") if w.strip()]
    if args.expression is not None:
        body["expression"] = args.expression
    if body:
        if args.job:
            body["job_id"] = args.job
        group = client.request("PUT", where, body)
    else:
        group = next((g for g in client.get("/v1/groups") if g["name"] == args.name), None)
        if group is None:
            raise NotFound(f"no group {args.name!r}", f"Make it: raysleuth group {args.name} --ranks 0,3.")
    print(json.dumps(group, indent=1) if args.json else format_groups([group]))
    return 0
