"""A crash record: what is kept of a worker that raised or died, after the process is gone.

Made by the agent at the raise site (an exception) or by the broker from Ray's record of a hard
death; stored on disk as JSON (`to_store`), served as `GET /v1/crashes` (`summary`) and
`GET /v1/crashes/{id}` (`to_json`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import get_args

from raysleuth.model.wire import CrashFrame, CrashKind, CrashSummary, CrashWorker

KINDS: tuple[CrashKind, ...] = get_args(CrashKind)


@dataclass
class CrashRecord:
    id: str
    #: `<yyyymmdd-hhmmss>-<hex>`, also the file name in the state dir.
    time: float
    #: When it happened (seconds since the epoch).
    kind: CrashKind
    #: One of KINDS.
    worker: CrashWorker = field(default_factory=lambda: CrashWorker())
    #: The worker object (the contract's fields) as it was at the crash.
    exc_type: str | None = None
    #: Qualified exception class (`builtins.ZeroDivisionError`); None for a hard death.
    message: str | None = None
    #: The exception's message, or Ray's exit detail.
    hint: str | None = None
    #: What to look at first (set by the store).
    held_until: float | None = None
    #: While the crashed worker is held for an attach: when it is let go.
    frames: list[CrashFrame] = field(default_factory=list)
    #: [{path, line, function, locals: {name: repr}}], innermost first.
    gpu: dict | None = None
    #: The last GPU sample of the worker (NVML), or None.
    cuda_memory: dict | None = None
    #: At a CUDA out-of-memory error: torch's memory_summary() text, the allocator's largest
    #: live blocks and the largest CUDA tensors Python held (raysleuth/probes/gpu.py), else None.
    ray_check: dict | None = None
    #: The fatal Ray check that aborted the process: {check (`file.h:66: Check failed: ...`), file
    #: (the log it is in, on the worker's node), text (the line and Ray's stack)}, else None.
    faulthandler: str | None = None
    #: Python's faulthandler text of a native crash, or None.
    traceback: str | None = None
    #: The formatted traceback (bounded).
    chain: list[dict] = field(default_factory=list)
    #: The exception's causes and contexts: [{exc_type, message}].
    rerun: dict | None = None
    #: A failed plain task, kept for "Rerun Under Debugger": {function, path, line (the first
    #: line it stops at), args (short reprs), bytes, runtime_env, resources}, or {unavailable:
    #: why not}; None for a hard death or a record from an older agent.
    raised_as: str | None = None
    #: When a library re-raised the user's error as its own (Ray Data's `UserCodeException`), what
    #: the task raised (`ray.exceptions.UserCodeException: UDF failed ...`); the record names the
    #: user's error. None otherwise.
    events: list[dict] = field(default_factory=list)
    #: The worker's last timeline events.
    task: str | None = None
    #: The task or actor method running at the crash.
    task_id: str | None = None
    exit_type: str | None = None
    #: Ray's exit type of a dead worker (SYSTEM_ERROR, NODE_OUT_OF_MEMORY, ...).
    exit_detail: str | None = None
    last_report: dict | None = None
    #: The worker's last heartbeat before it died.
    capture_ms: float | None = None
    #: How long the agent took to build the record.
    sources: dict[str, str] = field(default_factory=dict)
    #: Path → source text of the frames' files, for a replay where the files are not.
    extra: dict = field(default_factory=dict)
    #: Any other field a (newer) agent sent: kept on disk, not served.

    SUMMARY = ("id", "time", "kind", "exc_type", "message", "hint", "worker", "held_until")
    DETAIL = SUMMARY + (
        "frames", "gpu", "cuda_memory", "ray_check", "faulthandler", "traceback", "chain", "raised_as",
        "rerun", "events", "task", "task_id", "exit_type", "exit_detail", "last_report", "capture_ms",
        "sources",
    )  # fmt: skip

    @classmethod
    def from_json(cls, data: dict) -> CrashRecord:
        names = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        known = {k: v for k, v in data.items() if k in names}
        extra = {k: v for k, v in data.items() if k not in names and k != "extra"}
        extra.update(data.get("extra") or {})
        known.setdefault("id", "")
        known.setdefault("time", 0.0)
        known.setdefault("kind", "exception")
        for k in ("frames", "chain", "events"):
            known[k] = known.get(k) or []
        for k in ("worker", "sources"):
            known[k] = known.get(k) or {}
        return cls(**known, extra=extra)

    def summary(self) -> CrashSummary:
        return CrashSummary(
            id=self.id, time=self.time, kind=self.kind, exc_type=self.exc_type, message=self.message,
            hint=self.hint, worker=self.worker, held_until=self.held_until,
            can_rerun=self.rerun is not None and bool(self.rerun) and not self.rerun.get("unavailable"),
        )  # fmt: skip

    def to_json(self) -> dict:
        """The full record as `GET /v1/crashes/{id}` serves it."""
        return {k: getattr(self, k) for k in self.DETAIL}

    def to_store(self) -> dict:
        """Everything, for the file on disk."""
        return dict(self.to_json(), extra=self.extra)

    @property
    def worker_id(self) -> str | None:
        return self.worker.get("id")

    @property
    def label(self) -> str:
        return self.exc_type or self.kind or "crash"
