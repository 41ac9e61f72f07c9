"""A worker as the broker lists it (`GET /v1/workers`): one Ray worker process, merged from its
agent's reports and Ray's State API. The contract's fields, in order, then our extensions.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import get_args

from raysleuth.model.wire import GpuMemory, PausedAt, PauseDeadline, WorkerBusy, WorkerRole, WorkerState

STATES: tuple[WorkerState, ...] = get_args(WorkerState)


@dataclass
class Worker:
    id: str
    #: Ray's worker id (hex).
    pid: int | None = None
    node_id: str | None = None
    node_ip: str | None = None
    job_id: str | None = None
    actor_id: str | None = None
    actor_class: str | None = None
    actor_name: str | None = None
    task: str | None = None
    #: Name of the task (or actor method) running now; for a verl role, the role's own method
    #: (`ActorRolloutRefWorker.update_actor`, not `WorkerDict.actor_rollout_update_actor`).
    rank: int | None = None
    #: From raysleuth.set_rank(), RANK/LOCAL_RANK/WORLD_SIZE or Ray Train's context.
    local_rank: int | None = None
    world_size: int | None = None
    gpu_ids: list[int] = field(default_factory=list)
    state: WorkerState = "idle"
    #: One of STATES.
    paused_at: PausedAt | None = None
    #: {path, line, reason} while paused or held after a crash.
    agent: bool = False
    #: False for a worker seen only through Ray's State API.
    python: str | None = None
    last_seen: float | None = None
    cwd: str | None = None
    #: The worker's working folder (path mapping).
    armed: list[str] = field(default_factory=list)
    #: Ids of the cluster points armed in the worker now.
    crash: str | None = None
    #: Id of its newest crash record.
    held_until: float | None = None
    #: A crashed worker held for an attach is let go at this time.
    gpu_memory: GpuMemory | None = None
    #: {used_bytes, peak_bytes, growing} from its GPU samples.
    deadlines: list[PauseDeadline] = field(default_factory=list)
    #: While paused: [{what, seconds, setting}], the timeouts that end the pause (its agent's).
    paused_since: float | None = None
    #: When the broker first saw it paused (this pause).
    deadline: PauseDeadline | None = None
    #: While paused: the nearest of `deadlines` as {at, what, seconds, setting} (`at`: epoch s).
    busy: WorkerBusy | None = None
    #: An evaluate whose C code holds the worker's GIL ({what, since, expression}): it answers
    #: nothing until that ends; POST /v1/workers/{id}/kill ends the worker.
    worker_group: str | None = None
    #: verl's worker group: its name prefix (`WG_PREFIX`, the head of verl's actor names
    #: `<prefix><Class>_<pg>:<local rank>`). Each group of a job has its own ranks 0..N-1.
    roles: list[WorkerRole] = field(default_factory=list)
    #: The verl roles it hosts ([{name, class_name}]; a `WorkerDict` or `FusedWorker_*` hosts several).
    role: str | None = None
    #: The role running now (a role's name), or the only one it hosts.

    @property
    def live(self) -> bool:
        return self.state != "exited"

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> Worker:
        return cls(**{k: v for k, v in data.items() if k in FIELDS})


FIELDS = tuple(f.name for f in dataclasses.fields(Worker))
"""The worker object's fields, in the contract's order."""
