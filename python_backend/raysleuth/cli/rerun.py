"""`raysleuth rerun CRASH_ID [--json]`: run a failed task again, stopped at its function's first
line (issue 26), and say how to attach."""

from __future__ import annotations

import json
from urllib.parse import quote

from raysleuth.shared.textsafe import one_line


def run_rerun(client, crash_id: str, json_out: bool) -> int:
    # The broker answers once the rerun stopped at its first line: up to a minute for a new worker.
    reply = client.request("POST", f"/v1/crashes/{quote(crash_id, safe='')}/rerun", {}, timeout=90)
    if json_out:
        print(json.dumps(reply, indent=1))
        return 0
    at = reply.get("paused_at") or {}
    # Each line escaped (#37): the function, its arguments' reprs and the path come from the job.
    print(
        one_line(f"{reply['rerun']}: {reply.get('function')}({', '.join(map(str, reply.get('args') or []))})")
    )
    where = f"{at.get('path')}:{at.get('line')}"
    who = f"worker {reply['worker'][:8]} (pid {reply.get('pid')}, job {reply.get('job_id')})"
    print(one_line(f"stopped at {where} in {who}"))
    print(one_line(f"attach: raysleuth attach {reply['worker']}   (or click it in VS Code's Cluster view)"))
    return 0
