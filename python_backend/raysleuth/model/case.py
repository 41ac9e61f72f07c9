"""Cases: each failure the broker sees, as one object that names the rank, the step and the line
(issue 26). A case is made from its evidence by pure functions here: a crash record, a suspected
hang of the radar, a divergence of a watch, a worker's GPU memory.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field

from raysleuth.model.crash import CrashRecord
from raysleuth.model.stacks import is_library, rank_ranges
from raysleuth.model.wire import CaseKind

MAX_SUMMARY = 300


@dataclass
class Case:
    id: str
    #: `<kind>-<id of its evidence or a random hex>`.
    kind: CaseKind
    time: float
    #: When it happened (seconds since the epoch).
    job_id: str | None
    ranks: list[int]
    #: The ranks it is about (for a divergence, those that differ).
    summary: str
    #: One line: who, what, where, when: "rank 2 raised FloatingPointError at demo.py:69 in step, step 40".
    hint: str | None
    #: What to look at first.
    evidence: dict = field(default_factory=dict)
    #: Per kind: {crash} (the record's id); the stacks body; {expression, pass, step, ranks, values,
    #: last_agreed_pass, last_agreed_step}; the memory samples.

    LISTED = ("id", "kind", "time", "job_id", "ranks", "summary", "hint")
    """The fields of a row of `GET /v1/cases` (all but the evidence)."""

    def listing(self) -> dict:
        return {k: getattr(self, k) for k in self.LISTED}

    def to_json(self) -> dict:
        return dict(self.listing(), evidence=self.evidence)


def _where(frames: list) -> dict | None:
    """The innermost frame of the user's code (else the innermost frame)."""
    return next((f for f in frames if not is_library(f.get("path") or "")), frames[0] if frames else None)


def _place(frame: dict | None) -> str:
    if not frame:
        return "an unknown line"
    return (
        f"{os.path.basename(frame.get('path') or '?')}:{frame.get('line')} in {frame.get('function') or '?'}"
    )


def _int(value) -> int | None:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


def step_of(rec: CrashRecord) -> int | None:
    """The step a crash happened at, where known: a local `step` of its frames (innermost
    first), else the newest `step` event the worker sent."""
    for f in rec.frames:
        step = _int((f.get("locals") or {}).get("step"))
        if step is not None:
            return step
    for ev in reversed(rec.events or []):
        if ev.get("name") == "step":
            step = _int((ev.get("fields") or {}).get("step"))
            if step is not None:
                return step
    return None


def who(worker: dict) -> str:
    rank = worker.get("rank")
    if isinstance(rank, int):
        return f"rank {rank}"
    name = worker.get("actor_class") or worker.get("task")
    return f"{name} (pid {worker.get('pid')})" if name else f"pid {worker.get('pid') or '?'}"


def crash_case(rec: CrashRecord) -> Case:
    worker: dict = dict(rec.worker or {})
    what = (rec.exc_type or rec.kind or "crash").rpartition(".")[2]
    verb = "raised" if rec.kind == "exception" else "died:"
    text = f"{who(worker)} {verb} {what}"
    if rec.frames:
        text += f" at {_place(_where(rec.frames))}"
    step = step_of(rec)
    if step is not None:
        text += f", step {step}"
    if rec.message:
        text += f": {' '.join(rec.message.split())}"
    rank = worker.get("rank")
    return Case(
        id=f"crash-{rec.id}", kind="crash", time=rec.time, job_id=worker.get("job_id"),
        ranks=[rank] if isinstance(rank, int) else [], summary=text[:MAX_SUMMARY], hint=rec.hint,
        evidence={"crash": rec.id, "step": step},
    )  # fmt: skip


def hang_case(hang: dict, now: float) -> Case:
    """A suspected hang of the radar (hangwatch.HangDetector): who holds the others back, where
    the others wait, for how long."""
    stacks = hang.get("stacks") or {}
    groups = stacks.get("groups") or []
    behind = hang.get("behind") or []
    lasted = max(0, int(now - float(hang.get("since") or now)))
    where = _place(_where(list(groups[0].get("frames") or []))) if groups else None
    if behind:
        text = f"{behind[0].get('why')}"
        ranks = sorted({b["rank"] for b in behind if isinstance(b.get("rank"), int)})
    else:
        text = f"ranks {hang.get('ranks_text') or '?'} stood still"
        ranks = sorted({r for g in groups for r in g.get("ranks") or []})
    if where:
        text += f"; the others at {where}" if behind else f" at {where}"
    text += f" for {lasted} s"
    hint = (
        "The rank named behind is where to look: attach to it (its stack shows what it waits for), "
        "or compare the ranks' stacks in the Stacks view."
        if behind
        else "Every rank waits at the same place: look for a collective one rank never reached, or a "
        "lock, queue or ray.get that nothing will complete."
    )
    return Case(
        id=f"hang-{uuid.uuid4().hex[:10]}", kind="hang", time=now, job_id=hang.get("job_id"),
        ranks=ranks, summary=text[:MAX_SUMMARY], hint=hint,
        evidence={"stacks": stacks, "since": hang.get("since"), "samples": hang.get("samples"),
                  "text": hang.get("text"), "ranks_text": rank_ranges(ranks) if ranks else None},
    )  # fmt: skip


def _bytes(n) -> str:
    n = float(n or 0)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}" if unit == "GiB" else f"{n:.0f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def memory_case(
    worker: dict, samples: list[dict], reason: str, now: float, new_tensors: list[dict] | None = None
) -> Case:
    """A worker whose GPU memory grew across its newest samples (`growing`) or sits near its
    device's total (`near_total`). `samples`: the GPU history's rows for the worker, oldest first;
    `new_tensors`: the largest CUDA tensors its agent saw appear meanwhile, biggest first."""
    first, last = samples[0], samples[-1]
    used = int(last.get("used_bytes") or 0)
    if reason == "growing":
        grew = used - int(first.get("used_bytes") or 0)
        text = (
            f"{who(worker)}: GPU memory grew {_bytes(grew)} over {len(samples)} samples "
            f"({_bytes(first.get('used_bytes'))} → {_bytes(used)}), never falling"
        )
        hint = (
            "Memory that only goes up is a leak or a cache that is never freed: the GPU chart shows "
            "torch's allocated beside what the process holds; what is not PyTorch's is the CUDA "
            "context, NCCL buffers or another library."
        )
    else:
        total = int(last.get("total_bytes") or 0)
        device = int(last.get("device_used_bytes") or used)
        full = 100 * device // max(total, 1)
        text = f"{who(worker)}: GPU {last.get('gpu')} is {full}% full ({_bytes(device)} of {_bytes(total)})"
        hint = (
            "The next allocation may fail with CUDA out of memory: see which processes hold the "
            "device (the GPU chart of its node)."
        )
    not_torch = last.get("not_torch_bytes")
    if isinstance(not_torch, int) and not_torch > 0:
        text += f"; {_bytes(not_torch)} of it is not PyTorch's"
    if new_tensors:
        shown = ", ".join(_tensor_text(t) for t in new_tensors[:3])
        text += f"; new CUDA tensors: {shown}"
    rank = worker.get("rank")
    return Case(
        id=f"memory-{uuid.uuid4().hex[:10]}", kind="memory", time=now, job_id=worker.get("job_id"),
        ranks=[rank] if isinstance(rank, int) else [], summary=text[:MAX_SUMMARY], hint=hint,
        evidence={
            "reason": reason, "worker": worker.get("id"), "samples": samples,
            "new_cuda_tensors": new_tensors or [],
        },
    )  # fmt: skip


def _tensor_text(t: dict) -> str:
    """`Tensor[4096, 4096] float32 cuda:0 64.0 MiB`."""
    shape = ", ".join(str(d) for d in t.get("shape") or [])
    return f"Tensor[{shape}] {t.get('dtype', '?')} {t.get('device', '?')} {_bytes(t.get('bytes'))}"


def divergence_case(watch: dict, found: dict, job_id: str | None, now: float) -> Case:
    """The first pass of a watch where ranks differ (model/divergence.py's finding)."""
    ranks = list(found.get("ranks") or [])
    others = sorted(int(r) for r in (found.get("values") or {}) if int(r) not in ranks)
    where = f"{os.path.basename(str(watch.get('path')))}:{watch.get('line')}"
    when = f"pass {found.get('pass')}"
    if found.get("step") is not None:
        when += f" (step {found['step']})"
    who_text = ("rank " if len(ranks) == 1 else "ranks ") + rank_ranges(ranks)
    from_whom = rank_ranges(others) or "the others"
    text = f"{who_text} diverged from {from_whom} at {when} at {where}: {found.get('entry')}"
    if found.get("why"):
        text += f" ({found['why']})"
    last = found.get("last_agreed_pass")
    last_step = found.get("last_agreed_step")
    agreed = f"pass {last}" + (f" (step {last_step})" if last_step is not None else "")
    text += f"; all agreed at {agreed if last is not None else 'no earlier pass'}"
    hint = (
        "Open the comparison: the values per rank at the first pass that differs. The cause runs "
        "between the last agreeing pass and this one on the ranks named; a watch with stop pauses "
        "them at the line."
    )
    return Case(
        id=f"divergence-{uuid.uuid4().hex[:10]}", kind="divergence", time=now, job_id=job_id, ranks=ranks,
        summary=text[:MAX_SUMMARY], hint=hint,
        evidence={
            "watch": watch.get("id"), "expression": found.get("expression"), "entry": found.get("entry"),
            "pass": found.get("pass"), "step": found.get("step"), "ranks": ranks,
            "values": found.get("values"), "last_agreed_pass": last, "last_agreed_step": last_step,
            "path": watch.get("path"),
            "line": watch.get("line"),
        },
    )  # fmt: skip
