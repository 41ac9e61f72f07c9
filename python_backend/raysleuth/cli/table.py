"""Plain-text tables for the CLI and the demo."""

from __future__ import annotations


def _short(value, n: int = 8) -> str:
    return "-" if value in (None, "") else str(value)[:n]


def format_workers(workers: list[dict]) -> str:
    rows = [("NODE", "PID", "ACTOR", "TASK", "RANK", "STATE", "WORKER")]
    for w in workers:
        actor = w.get("actor_class") or ("(task)" if w.get("task") else "-")
        if w.get("actor_name"):
            actor += f" '{w['actor_name']}'"
        state = w["state"]
        if state == "paused" and w.get("paused_at"):
            p = w["paused_at"]
            state += f" at {p.get('path')}:{p.get('line')}"
        if not w.get("agent"):
            state += " (no agent)"
        node = f"{w.get('node_ip') or '?'} {_short(w.get('node_id'), 4)}"
        rows.append(
            (
                node,
                str(w.get("pid") or "-"),
                actor,
                _short(w.get("task"), 28),
                "-" if w.get("rank") is None else str(w["rank"]),
                state,
                _short(w["id"]),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip() for r in rows)
