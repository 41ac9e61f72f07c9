"""Plain-text tables for the CLI and the demo."""

from __future__ import annotations

from raysleuth.shared.textsafe import one_line


def _short(value, n: int = 8) -> str:
    return "-" if value in (None, "") else one_line(str(value)[:n])


def format_workers(workers: list[dict]) -> str:
    rows: list[tuple[str, ...]] = [("NODE", "PID", "ACTOR", "TASK", "RANK", "STATE", "WORKER")]
    for w in workers:
        actor = w.get("actor_class") or ("(task)" if w.get("task") else "-")
        roles = [str(r["name"]) for r in w.get("roles") or () if isinstance(r, dict) and r.get("name")]
        if roles:  # a verl WorkerDict / FusedWorker_*: its roles first (#38)
            actor = f"{','.join(roles)} ({actor})"
        if w.get("actor_name"):
            actor += f" '{w['actor_name']}'"
        state = w["state"]
        if state == "paused" and w.get("paused_at"):
            p = w["paused_at"]
            state += f" at {p.get('path')}:{p.get('line')}"
        if not w.get("agent"):
            state += " (no agent)"
        if w.get("busy"):  # an evaluate's C code holds it (#37): `raysleuth kill ID` ends it
            from raysleuth.cli.evaluate import busy_text

            state += busy_text(w["busy"])
        node = f"{w.get('node_ip') or '?'} {_short(w.get('node_id'), 4)}"
        cells = (node, w.get("pid") or "-", actor, _short(w.get("task"), 40), w.get("rank"), state)
        # Every cell from the cluster escaped: a name's newline or ESC must not forge a row (#37).
        rows.append((*(one_line("-" if c is None else c) for c in cells), _short(w["id"])))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip() for r in rows)
