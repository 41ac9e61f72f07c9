"""User code of a verl 0.9.1 job, as verl's own CPU tests write it (tests/single_controller/
test_ray_local_envs_on_cpu.py, test_fused_workers_on_cpu.py): `Worker` subclasses whose methods
are registered with `@register(dispatch_mode=...)`, made into Ray actors by `RayWorkerGroup` on a
CPU `RayResourcePool`, which puts RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT in each worker's
environment. `Trainer` joins a gloo process group over them; `ActorRole` and `CriticRole` are
role classes for verl's colocated (`WorkerDict`) and fused (`FusedWorker_actor_critic`) classes.

Workers import this module by name (the tests put its folder on PYTHONPATH); breakpoints are set
on its absolute path at the `# @bp` markers.
"""

from __future__ import annotations

import datetime
import math
import os
import time

import ray
import torch
import torch.distributed as dist
from verl import DataProto
from verl.single_controller.base import Worker
from verl.single_controller.base.decorator import Dispatch, register


@ray.remote
class Trainer(Worker):
    """One rank of a worker group: a gloo process group over the group's ranks, as verl's FSDP
    workers make one (env:// from the MASTER_ADDR/MASTER_PORT the group set)."""

    def __init__(self) -> None:
        super().__init__()
        if not dist.is_initialized():
            dist.init_process_group(
                "gloo", rank=self.rank, world_size=self.world_size, timeout=datetime.timedelta(seconds=300)
            )

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def pid(self) -> int:
        return os.getpid()

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def all_reduce(self, step: int) -> float:
        t = torch.full((4,), float(self.rank + step))
        dist.all_reduce(t)
        total = float(t[0])
        return total  # @bp verl-all-reduce

    @register(dispatch_mode=Dispatch.DP_COMPUTE_PROTO)
    def score(self, data: DataProto) -> DataProto:
        x = data.batch["x"]
        y = x * 2 + self.rank
        return DataProto.from_dict(tensors={"y": y})  # @bp verl-dp

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def check_loss(self, step: int, bad_rank: int) -> float:
        loss = 1.0 / (step + 1)
        if self.rank == bad_rank and step == 3:
            raise FloatingPointError(f"loss is nan on rank {self.rank}")  # @bp verl-raise
        return loss

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def late_all_reduce(self, late_rank: int, release_file: str) -> float:
        """One all-reduce every rank passes, then one that `late_rank` enters only once
        `release_file` exists: until then it loops in Python while the others wait inside."""
        t = torch.ones(4)
        dist.all_reduce(t)
        if self.rank == late_rank:
            while not os.path.exists(release_file):
                time.sleep(0.01)  # @bp verl-late-loop
        dist.all_reduce(t)  # @bp verl-wait
        return float(t[0])

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def train_step(self, step: int, drifter: int, drift_from: int) -> float:
        grad = [math.sin(i * 0.1 + step) for i in range(16)]
        if self.rank == drifter and step >= drift_from:
            grad[0] += 1e-3
        grad_norm = math.sqrt(sum(g * g for g in grad))
        return grad_norm  # @bp verl-watch


def log_metrics(worker: Worker, step: int, value: float) -> float:
    """Code both roles run (a shared helper): `[role critic]` here stops only the critic's calls."""
    metric = value + step  # @bp verl-shared
    return metric


@ray.remote
class ActorRole(Worker):
    """The actor role of a colocated or fused class."""

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def update_actor(self, step: int) -> float:
        loss = step * 2.0 + self.rank  # @bp verl-actor
        return log_metrics(self, step, loss)


@ray.remote
class CriticRole(Worker):
    """The critic role, with verl's tracker case (#1473/#1474): `breakpoint()` in `init_model`
    registered ONE_TO_ALL."""

    def __init__(self) -> None:
        super().__init__()
        self.ready = False

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def init_model(self, pause: bool = False) -> int:
        width = 8 + self.rank  # @bp verl-init-model
        if pause:
            breakpoint()  # @bp verl-breakpoint
        self.ready = True
        return width

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def compute_values(self, step: int) -> int:
        v = step + 100 * self.rank  # @bp verl-critic
        return int(log_metrics(self, step, v))

    @register(dispatch_mode=Dispatch.ONE_TO_ALL)
    def pid(self) -> int:
        return os.getpid()
