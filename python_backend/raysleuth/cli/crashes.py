"""`raysleuth crashes [ID] [--json]`: the broker's crash records, newest first, or one in full."""

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


def _who(w: dict) -> str:
    rank = w.get("rank")
    parts = [
        f"rank {rank}" if rank is not None else None,
        w.get("actor_class") or w.get("task"),
        f"pid {w.get('pid')}",
    ]
    return one_line(" · ".join(str(p) for p in parts if p))


def format_list(crashes: list[dict]) -> str:
    if not crashes:
        return "No crashes recorded."
    rows = [("ID", "TIME", "KIND", "WORKER", "ERROR")]
    for c in crashes:
        err = c.get("exc_type") or ""
        msg = (c.get("message") or "").splitlines()[0] if c.get("message") else ""
        rows.append(
            (
                one_line(c["id"]),
                _when(c.get("time")),
                one_line(c.get("kind") or ""),
                _who(c.get("worker") or {}),
                one_line(f"{err}: {msg}"[:80].strip(": ")),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    return "\n".join("  ".join(r[i].ljust(widths[i]) for i in range(4)) + "  " + r[4] for r in rows)


def format_detail(c: dict) -> str:
    wid = one_line(str((c.get("worker") or {}).get("id", "?"))[:12])
    out = [
        f"crash {one_line(c['id'])} · {one_line(c.get('kind'))} · {_when(c.get('time'))}",
        f"worker: {_who(c.get('worker') or {})} (id {wid})",
        f"error:  {one_line(c.get('exc_type') or '')} {lines(c.get('message') or '')}".rstrip(),
        f"hint:   {lines(c.get('hint'))}",
    ]
    frames = c.get("frames") or []
    if frames:
        out.append("stack (innermost first):")
        for f in frames:
            out.append(f"  {one_line(f.get('path'))}:{f.get('line')} in {one_line(f.get('function'))}")
            for k, v in (f.get("locals") or {}).items():
                out.append(f"      {one_line(k)} = {one_line(v)}")
    if c.get("faulthandler"):
        out += ["faulthandler:", *("  " + one_line(ln) for ln in c["faulthandler"].splitlines()[:40])]
    gpu = c.get("gpu")
    if gpu and gpu.get("gpus"):
        for g in gpu["gpus"]:
            mib = {k: (g.get(k) or 0) / 2**20 for k in ("used_bytes", "device_used_bytes", "total_bytes")}
            out.append(
                f"gpu {g.get('gpu')}: this process {mib['used_bytes']:.0f} MiB, "
                f"device {mib['device_used_bytes']:.0f} / {mib['total_bytes']:.0f} MiB"
            )
    crash = one_line(c["id"])
    out.append(
        f'replay: attach {{"ticket": T, "crash": "{crash}"}}, T from `raysleuth ticket --crash {crash}` '
        "(the extension's Crashes view does it)"
    )
    return lines("\n".join(out))  # and whatever field above was missed: no ESC, CR or bidi raw


def run_crashes(client, crash_id: str | None, json_out: bool) -> int:
    # Quoted: an id with a control character or a space is the broker's 404, not a bad URL (#37).
    data = client.get(f"/v1/crashes/{quote(crash_id, safe='')}") if crash_id else client.get("/v1/crashes")
    if json_out:
        print(json.dumps(data, indent=1))
    else:
        print(format_detail(data) if crash_id else lines(format_list(data)))
    return 0
