"""A verl-style worker group, written for the framework tests.

verl runs several roles (actor, critic, ...) in one Ray actor: `create_colocated_worker_cls`
builds a class at run time that holds one instance of each role class and carries each role's
methods under a prefix (`actor_update`, `critic_value`), and `RayWorkerGroup` starts one such
actor per rank with RANK/WORLD_SIZE in its environment. This module does the same, small.
"""

from __future__ import annotations

import os

import ray


class Worker:
    """verl's `Worker` base: the rank and world size the group put in the environment."""

    def __init__(self) -> None:
        self.rank = int(os.environ["RANK"])
        self.world_size = int(os.environ["WORLD_SIZE"])


class ActorRole(Worker):
    def update(self, step: int) -> float:
        loss = step * 2.0 + self.rank  # @bp verl-actor
        return loss


class CriticRole(Worker):
    def value(self, step: int) -> int:
        v = step + 100 * self.rank  # @bp verl-critic
        return v


def _public_methods(cls) -> list[str]:
    return [n for n, v in vars(cls).items() if callable(v) and not n.startswith("_")]


def create_colocated_worker_cls(class_dict: dict[str, type]):
    """One class for all roles, made at run time; role `key`'s method `m` is `key_m` on it."""

    class WorkerDict(Worker):
        def __init__(self) -> None:
            super().__init__()
            self.worker_dict = {key: cls() for key, cls in class_dict.items()}

        def pid(self) -> int:
            return os.getpid()

    for key, cls in class_dict.items():
        for name in _public_methods(cls):

            def bound(self, *args, _key=key, _name=name, **kwargs):
                return getattr(self.worker_dict[_key], _name)(*args, **kwargs)

            bound.__name__ = f"{key}_{name}"
            setattr(WorkerDict, bound.__name__, bound)
    return WorkerDict


class RayWorkerGroup:
    """One actor per rank of the fused class, each with its rank in RANK/WORLD_SIZE (as verl)."""

    def __init__(self, worker_cls, world_size: int) -> None:
        remote_cls = ray.remote(num_cpus=0)(worker_cls)
        self.workers = [
            remote_cls.options(
                runtime_env={"env_vars": {"RANK": str(r), "WORLD_SIZE": str(world_size)}}
            ).remote()
            for r in range(world_size)
        ]

    def execute_all(self, method: str, *args):
        """Call `method` on every rank; the object refs, in rank order."""
        return [getattr(w, method).remote(*args) for w in self.workers]

    def kill(self) -> None:
        for w in self.workers:
            ray.kill(w)
