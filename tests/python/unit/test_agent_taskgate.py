"""The agent calls the registry only once Ray ran a task in its process (taskgate.py): the first
call of Ray's per-task lookup marks it, tells the agent, and puts Ray's own method back."""

from __future__ import annotations

import importlib
import logging
import types

import pytest

from raysleuth.agent import registry, taskgate


@pytest.fixture
def gate():
    importlib.reload(taskgate)  # a process that has run no task yet
    yield taskgate
    importlib.reload(taskgate)


def fake_function_manager():
    class FunctionActorManager:
        def get_execution_info(self, job_id, descriptor):
            return ("info", job_id, descriptor)

        def load_actor_class(self, job_id, descriptor):
            return ("class", job_id, descriptor)

    return types.SimpleNamespace(FunctionActorManager=FunctionActorManager)


def test_the_first_task_marks_tells_once_and_restores_rays_method(gate):
    module = fake_function_manager()
    cls = module.FunctionActorManager
    originals = {name: cls.__dict__[name] for name in gate.WRAPPED}
    told = []
    gate.on_first_task(lambda: told.append("agent"))
    gate.on_first_task(lambda: 1 / 0)  # a failing watcher is swallowed, never raised into Ray
    gate.install(module)
    assert not gate.task_ran()
    assert cls.__dict__["get_execution_info"] is not originals["get_execution_info"]
    manager = cls()
    assert manager.get_execution_info("job", "f") == ("info", "job", "f")
    assert gate.task_ran() and told == ["agent"]
    assert cls.__dict__["get_execution_info"] is originals["get_execution_info"]
    manager.load_actor_class("job", "A")  # the other wrap marks nothing more and restores itself
    assert cls.__dict__["load_actor_class"] is originals["load_actor_class"] and told == ["agent"]
    gate.on_first_task(lambda: told.append("late"))  # after the first task: called at once
    assert told == ["agent", "late"]
    gate.install(module)  # a second install wraps nothing again
    assert cls.__dict__["get_execution_info"] is originals["get_execution_info"]


def test_an_actor_process_is_marked_by_its_creation_task(gate):
    module = fake_function_manager()
    gate.install(module)
    module.FunctionActorManager().load_actor_class("job", "A")
    assert gate.task_ran()


def test_a_driver_may_call_at_once(gate):
    gate.mark_driver()
    assert gate.task_ran()


def test_no_registry_lookup_before_the_first_task(gate, monkeypatch):
    import ray

    asked = []
    monkeypatch.setattr(ray, "get_actor", lambda *a, **k: asked.append(a) or "handle")
    link = registry.RegistryLink(log=lambda: logging.getLogger("test"), who=lambda: "test")
    assert link.lookup() is None and asked == []
    gate.mark_driver()
    link.look_now()
    assert link.lookup() == "handle" and len(asked) == 1


def test_rays_per_task_lookups_are_still_there():
    """The wrap needs Ray's method names: a Ray that renames them must fail here, not in a cluster."""
    from ray._private import function_manager

    for name in taskgate.WRAPPED:
        assert callable(function_manager.FunctionActorManager.__dict__.get(name)), name
