"""Live workers of one remote definition, as lens titles (with the commands the extension runs on
a click) and as hover text. Pure functions of the broker's data."""

from __future__ import annotations

from dataclasses import dataclass

from raysleuth.lsp.remotes import RemoteDef
from raysleuth.model.worker import Worker

REVEAL = "raySleuth.revealWorkers"
"""Client command: reveal these workers in the Cluster view. Argument: {name, kind, workers: [ids]}."""
ATTACH = "raySleuth.attachWorker"
"""Client command (the extension's own): attach a debug session to a worker id."""
INSPECT_CRASH = "raySleuth.inspectCrash"
"""Client command (the extension's own): open a session on a crash record id."""


@dataclass(frozen=True)
class LensPart:
    title: str
    command: str
    arguments: list


def matches(defn: RemoteDef, worker: Worker) -> bool:
    """An actor class by `actor_class`, or a verl role class a `WorkerDict`/`FusedWorker_*` hosts
    (#38); a function by the task it runs (`f` or `module.f`)."""
    if defn.kind == "actor":
        return worker.actor_class == defn.name or any(r.get("class_name") == defn.name for r in worker.roles)
    task = worker.task or ""
    return not worker.actor_class and (task == defn.name or task.endswith("." + defn.name))


def crash_matches(defn: RemoteDef, crash: dict) -> bool:
    return matches(defn, Worker.from_json(crash.get("worker") or {"id": ""}))


def workers_of(defn: RemoteDef, workers: list[Worker]) -> list[Worker]:
    """Its workers, by rank (unranked last), live ones first."""
    mine = [w for w in workers if matches(defn, w)]
    return sorted(mine, key=lambda w: (not w.live, w.rank is None, w.rank or 0, w.pid or 0))


def lens_parts(defn: RemoteDef, workers: list[Worker], crashes: list[dict]) -> list[LensPart]:
    """`4 workers`, `1 paused`, `1 crashed`: one lens each, each with what a click does."""
    mine = workers_of(defn, workers)
    live = [w for w in mine if w.live]
    ids = [w.id for w in live]
    what = "worker" if len(live) == 1 else "workers"
    parts = [
        LensPart(f"{len(live)} {what}", REVEAL, [{"name": defn.name, "kind": defn.kind, "workers": ids}])
    ]
    paused = [w for w in live if w.state == "paused"]
    if paused:
        parts.append(LensPart(f"{len(paused)} paused", ATTACH, [paused[0].id]))
    crashed = [w for w in live if w.state == "crashed"]
    newest = next((c for c in crashes if crash_matches(defn, c)), None)
    if crashed or newest:
        crash_id = crashed[0].crash if crashed and crashed[0].crash else (newest or {}).get("id")
        count = len(crashed) or sum(1 for c in crashes if crash_matches(defn, c))
        parts.append(LensPart(f"{count} crashed", INSPECT_CRASH, [crash_id]))
    return parts


def hover_markdown(defn: RemoteDef, workers: list[Worker] | None, crashes: list[dict]) -> str:
    """Its live workers by rank with state and GPU memory, and the newest crash's message.
    `workers` None: no broker connected."""
    kind = "actor class" if defn.kind == "actor" else "remote function"
    head = f"**Ray {kind} `{defn.name}`**"
    if workers is None:
        return f"{head}\n\nNo Ray Sleuth broker connected: live workers show once one is."
    live = [w for w in workers_of(defn, workers) if w.live]
    lines = [head, ""]
    if not live:
        lines.append("No live workers.")
    else:
        lines += ["| rank | state | pid | GPU memory | node |", "| --- | --- | --- | --- | --- |"]
        for w in live:
            rank = "-" if w.rank is None else str(w.rank)
            state: str = w.state or "-"
            if w.paused_at:
                state += f" at line {w.paused_at.get('line')}"
            node = (w.node_ip or "") + (f" {w.node_id[:4]}" if w.node_id else "")
            lines.append(f"| {rank} | {state} | {w.pid or '-'} | {_gpu(w)} | {node.strip() or '-'} |")
    newest = next((c for c in crashes if crash_matches(defn, c)), None)
    if newest:
        crashed_rank = (newest.get("worker") or {}).get("rank")
        who = f"rank {crashed_rank}" if crashed_rank is not None else "a worker"
        message = f"{newest.get('exc_type') or newest.get('kind')}: {newest.get('message') or ''}".strip()
        lines += ["", f"Last crash ({who}): `{_one_line(message)}`"]
        if newest.get("hint"):
            lines.append(f"_{_one_line(newest['hint'])}_")
    return "\n".join(lines)


def _gpu(w: Worker) -> str:
    mem = w.gpu_memory
    used = mem.get("used_bytes") if mem else None
    if mem is None or used is None:
        return "-"
    text = f"{used / 2**30:.1f} GiB"
    if mem.get("peak_bytes"):
        text += f" (peak {mem['peak_bytes'] / 2**30:.1f})"
    return text + (" ↑" if mem.get("growing") else "")


def _one_line(text: str, limit: int = 200) -> str:
    text = " ".join(str(text).split()).replace("`", "'")
    return text if len(text) <= limit else text[: limit - 1] + "…"
