"""Shapes nested in the broker's public objects, typed once: the broker fills them, the CLI and
the language server read them, and `scripts/gen_wire_types.py` writes the extension's
TypeScript from them (`extension/broker/wire.ts`), so no shape is written twice.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

WorkerState = Literal["running", "idle", "paused", "crashed", "exited"]
CrashKind = Literal["exception", "worker_died", "oom", "segfault"]
CaseKind = Literal["crash", "hang", "divergence", "memory"]


class PausedAt(TypedDict):
    """Where a worker is paused (or held after a crash)."""

    path: str | None
    line: int | None
    #: "breakpoint", "exception", "pause", "step", "crash", ...
    reason: str | None


class WorkerRole(TypedDict):
    """A verl role a worker hosts (issue 38): `actor` of a `WorkerDict` or `FusedWorker_actor_critic`."""

    #: The role's name as verl keys it: "actor", "critic", "actor_rollout", ...
    name: str
    #: The role's class, e.g. "ActorRolloutRefWorker"; null until the actor made it.
    class_name: str | None


class GpuMemory(TypedDict):
    """A worker's GPU memory from its NVML samples (all its GPUs)."""

    used_bytes: int
    peak_bytes: int
    #: The last samples never fell and rose by 256 MiB or more.
    growing: bool


class WorkerBusy(TypedDict):
    """What holds a worker that cannot answer: an evaluate whose C code holds its GIL (#37)."""

    #: "evaluate".
    what: str
    #: When it started (seconds since the epoch).
    since: float
    expression: str


class PauseDeadline(TypedDict):
    """A timeout that ends a worker's pause, e.g. Ray Train's health check."""

    #: When it fires (seconds since the epoch); absent in `deadlines`' entries.
    at: NotRequired[float]
    #: e.g. "Ray Train's worker health check".
    what: str
    seconds: float
    #: What to raise to give a pause more time, e.g. "RAY_TRAIN_WORKER_HEALTH_CHECK_TIMEOUT_S".
    setting: str


class CrashWorker(TypedDict, total=False):
    """The worker as it was at a crash (the worker object's fields; older records hold fewer)."""

    id: str
    pid: int | None
    node_id: str | None
    node_ip: str | None
    job_id: str | None
    actor_id: str | None
    actor_class: str | None
    actor_name: str | None
    task: str | None
    rank: int | None
    local_rank: int | None
    world_size: int | None
    gpu_ids: list[int]
    cwd: str | None
    #: verl's worker group, the roles it hosts and the role that ran (issue 38).
    worker_group: str | None
    roles: list[WorkerRole]
    role: str | None


class CrashFrame(TypedDict, total=False):
    """One frame of a crash record, innermost first."""

    path: str
    line: int
    function: str
    #: Name → bounded repr of each local.
    locals: dict[str, str]
    #: A library's frame (verl's wrappers, Ray's executor, the standard library), not the
    #: user's: `model/frames.py`'s rule.
    library: bool


class ArmedOn(TypedDict):
    """One worker that has a cluster point armed."""

    worker: str
    rank: int | None
    pid: int | None


class PointJson(TypedDict):
    """One cluster point as `GET /v1/breakpoints` (and `/v1/snapshots`) list it."""

    id: str
    #: The file as the editor sent it (an absolute local path).
    path: str
    #: 1-based.
    line: int
    #: As written, scope prefix included, e.g. "[rank 0,2-3] step % 100 == 0".
    condition: str | None
    hitCondition: str | None
    logMessage: str | None
    ranks: list[int] | None
    #: The scope without brackets, e.g. "rank 0,2-3"; null: every worker.
    scope: str | None
    #: Who set it: "cli", "api", "vscode:<window>", or what a client named itself.
    owner: str
    #: Number of workers that have it armed now.
    armed: NotRequired[int]
    #: Which workers have it armed now, by rank.
    armed_on: NotRequired[list[ArmedOn]]
    #: Live workers that have not taken the set yet.
    pending: NotRequired[int]
    #: Snapshot points: the snapshot id rows are filed under.
    snapshot: NotRequired[str | None]
    #: Snapshot points: captures per worker.
    count: NotRequired[int | None]
    #: Snapshot points: when it was added.
    created: NotRequired[float | None]
    #: Snapshot points: expressions recorded at each capture.
    expressions: NotRequired[list[str] | None]


class CrashSummary(TypedDict):
    """One row of `GET /v1/crashes` (newest first)."""

    id: str
    #: When it happened (seconds since the epoch).
    time: float
    kind: CrashKind
    exc_type: str | None
    message: str | None
    #: What to look at first.
    hint: str | None
    worker: CrashWorker
    #: While the crashed worker is held for an attach: when it is let go.
    held_until: float | None
    #: The failed call is kept: `POST /v1/crashes/{id}/rerun` runs it again under the debugger.
    can_rerun: bool
