"""`raysleuth stacks [--job J] [--ranks R] [--workers ID,...] [--native] [--tree] [--all-frames]
[--json] [--watch S]`: every worker's stack in one grouped view, and the watch mode that raises
"suspected hang". Library frames (verl's dispatch wrappers, Ray's executor, the standard
library: `model/frames.py`) are folded into one line per run unless `--all-frames`.

Prints the broker's `text` (the same as the extension's "Copy as text"), or its JSON. `--watch`
turns the broker's sampler on, prints each sample and each hang from the event stream until
Ctrl-C, and turns the sampler off again if it was off before.
"""

from __future__ import annotations

import json
import math
import sys
from urllib.parse import urlencode

from raysleuth.shared.textsafe import lines, one_line

STREAM_TIMEOUT_S = 60.0
"""The stream sends a keepalive every 15 s: a minute of silence means the broker is gone."""


def query_path(args) -> str:
    params = {}
    for key in ("job", "ranks", "workers", "timeout"):
        value = getattr(args, key, None)
        if value not in (None, ""):
            params[key] = value
    if getattr(args, "native", False):
        params["native"] = "1"
    if getattr(args, "tree", False):
        params["tree"] = "1"
    if getattr(args, "all_frames", False):
        params["all_frames"] = "1"
    return "/v1/stacks" + (f"?{urlencode(params)}" if params else "")


def format_result(result: dict) -> str:
    """The broker's text, and how long it took."""
    n = len(result.get("workers") or [])
    took = result.get("elapsed_ms")
    tail = f"{n} worker(s) in {took:.0f} ms" if isinstance(took, (int, float)) else f"{n} worker(s)"
    return f"{lines(result.get('text') or '')}\n({tail})"


def format_trees(result: dict, all_frames: bool = False) -> str:
    """The parallel stack tree(s) of `?tree=1`: one per job, outermost frame first; library
    frames folded unless `all_frames`."""
    from raysleuth.model.stacktree import format_tree

    trees = result.get("tree")
    trees = [trees] if isinstance(trees, dict) else trees or []
    out: list[str] = []
    for t in trees:
        out += [f"job {one_line(t['job_id'])}:" if t.get("job_id") else "job:"]
        out += [
            one_line(line) for line in format_tree(t, "  ", all_frames)
        ]  # a frame's newline forges no line
    return "\n".join(out) if out else "No stacks."


def format_hang(hang: dict) -> str:
    ranks = f" ranks {one_line(hang['ranks_text'])}" if hang.get("ranks_text") else ""
    head = f"SUSPECTED HANG: job {one_line(hang.get('job_id'))}{ranks}:"
    head += f" the same stacks for {one_line(hang.get('samples'))} samples with no step event"
    return head + "\n" + lines(hang.get("text") or "")


def run_stacks(client, args, out=None) -> int:
    out = out or sys.stdout
    took = getattr(args, "timeout", None)
    if took and math.isfinite(took) and hasattr(client, "timeout"):
        # The broker's deadline, then ours; a huge one (the broker refuses it) stays in what a
        # socket takes: `--timeout 1e300` is the broker's 400, not an OverflowError (#37).
        client.timeout = max(client.timeout, min(took, 3600.0) + 5)
    if args.watch is None:
        result = client.get(query_path(args))
        if args.json:
            print(json.dumps(result, indent=1), file=out)
        elif getattr(args, "tree", False):
            print(format_trees(result, getattr(args, "all_frames", False)), file=out)
        else:
            print(format_result(result), file=out)
        return 0
    return watch(client, args, out)


def watch(client, args, out) -> int:
    was = client.get("/v1/stacks/watch")
    status = client.put("/v1/stacks/watch", {"interval": args.watch, "samples": args.samples})
    print(
        f"watching every {status['interval']:g} s; a job whose stacks stay the same for"
        f" {status['samples']} samples with no step event is a suspected hang (Ctrl-C to stop)",
        file=out,
        flush=True,
    )
    try:
        for event, data in client.events(("stacks", "hang"), STREAM_TIMEOUT_S):
            if args.json:
                print(json.dumps({"event": event, "data": data}), file=out, flush=True)
            elif event == "stacks":
                print(format_result(data), file=out, flush=True)
            elif event == "hang":
                print(format_hang(data), file=out, flush=True)
    except KeyboardInterrupt:
        pass
    finally:
        if not was.get("on"):
            client.delete("/v1/stacks/watch")
        elif (was.get("interval"), was.get("samples")) != (status["interval"], status["samples"]):
            client.put("/v1/stacks/watch", {"interval": was["interval"], "samples": was["samples"]})
    return 0
