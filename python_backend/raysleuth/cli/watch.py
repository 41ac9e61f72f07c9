"""`raysleuth watch FILE:LINE EXPR... [--ranks R] [--every N] [--rtol X] [--step NAME] [--stop]`:
a first-divergence watch (issue 26); prints its id, then the divergence case once it is filed."""

from __future__ import annotations

import os

from raysleuth.cli.breaks import parse_location
from raysleuth.shared.errors import BadRequest
from raysleuth.shared.textsafe import one_line


def run_watch(client, args) -> int:
    if not args.expressions:
        raise BadRequest("Say what to watch: raysleuth watch FILE:LINE EXPR...", "e.g. train.py:88 grad loss")
    path, line = parse_location(args.location)
    body: dict = {
        "path": os.path.abspath(path),
        "line": line,
        "expressions": args.expressions,
        "stop": args.stop,
    }
    if args.ranks:
        from raysleuth.model.scope import parse_ranks

        body["ranks"] = sorted(parse_ranks(args.ranks))
    for name in ("every", "rtol", "step"):
        if getattr(args, name) is not None:
            body[name] = getattr(args, name)
    from raysleuth.cli.evaluate import confirm_unbounded

    if confirm_unbounded(args.expressions, getattr(args, "force", False)):
        body["force"] = True
    wid = client.post("/v1/watches", body)["id"]
    what = ", ".join(args.expressions)
    print(one_line(f"watch {wid} at {path}:{line} on {what}; waiting for a divergence (Ctrl-C stops)"))
    for event, data in client.events(["case"], timeout=None):
        if event != "case" or data.get("kind") != "divergence":
            continue
        case = client.get(f"/v1/cases/{data['id']}")
        if (case.get("evidence") or {}).get("watch") == wid:
            print(one_line(case.get("summary")))
            print(one_line(f"case {case['id']}: raysleuth cases {case['id']}"))
            return 0
    return 0
