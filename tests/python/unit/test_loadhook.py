"""The load hook is on Ray's loaders before Ray can load a class, and a class that was loaded
without it (a late agent) is still reported at the next task. Fresh interpreters, real Ray."""

from __future__ import annotations

import importlib
import sys
import textwrap
import uuid

import pytest
from helpers import run_probe

PROBE = textwrap.dedent(
    """
    import json, sys
    from raysleuth.agent import loadhook

    class Agent:
        def __init__(self):
            self.loaded = []
        def code_loaded(self, obj):
            self.loaded.append(obj)

    agent = Agent()
    {before}
    loadhook.install_early(agent)
    imported_then = "ray._private.function_manager" in sys.modules
    import ray
    from ray._private import function_manager as fm
    wrapped = hasattr(fm.FunctionActorManager.load_actor_class, "__wrapped__")
    left = [type(f).__name__ for f in sys.meta_path if type(f).__name__ == "_PostImportFinder"]
    print(json.dumps({{"imported_then": imported_then, "wrapped": wrapped, "finders_left": left}}))
    """
)


def probe(before: str) -> dict:
    pytest.importorskip("ray")
    return run_probe(PROBE.format(before=before))


def test_installed_when_ray_is_imported_later():
    res = probe(before="")
    assert res == {"imported_then": False, "wrapped": True, "finders_left": []}


def test_installed_at_once_when_ray_is_imported_already():
    res = probe(before="import ray")
    assert res == {"imported_then": True, "wrapped": True, "finders_left": []}


def test_a_class_loaded_before_the_wrap_is_reported_at_the_next_load():
    pytest.importorskip("ray")
    from ray._private import function_manager as fm
    from ray._raylet import PythonFunctionDescriptor

    from raysleuth.agent import loadhook

    if loadhook._installed:
        pytest.skip("the hook is installed in this process already")

    class Agent:
        def __init__(self):
            self.loaded = []

        def code_loaded(self, obj):
            self.loaded.append(obj)

    class Early:
        pass

    desc = PythonFunctionDescriptor("m", "__init__", "Early")
    manager = fm.FunctionActorManager.__new__(fm.FunctionActorManager)
    # What a load that started before the wrap leaves: the class in Ray's cache.
    manager._loaded_actor_classes = {desc.function_id: Early}
    agent = Agent()
    original = fm.FunctionActorManager.load_actor_class
    try:
        loadhook.install(agent)
        assert fm.FunctionActorManager.load_actor_class is not original
        assert manager.load_actor_class(None, desc) is Early
        assert agent.loaded == [Early]
        manager.load_actor_class(None, desc)  # Ray calls it per task: reported once
        assert agent.loaded == [Early]
    finally:
        for name in ("load_actor_class", "fetch_and_register_remote_function", "_load_function_from_local"):
            wrapped = getattr(fm.FunctionActorManager, name)
            setattr(fm.FunctionActorManager, name, getattr(wrapped, "__wrapped__", wrapped))
        loadhook._installed = False


def test_after_import_calls_back_once_per_watched_module_then_leaves(tmp_path, monkeypatch):
    """The import watch both hooks use: each watched module's callback runs right after that
    module ran, once, and its finder leaves sys.meta_path; other imports pass untouched."""
    from raysleuth.agent import loadhook

    names = [f"rs_watch_{uuid.uuid4().hex[:8]}_{i}" for i in range(3)]
    for n in names:
        (tmp_path / f"{n}.py").write_text("VALUE = 41\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []

    def then(module):
        seen.append((module.__name__, module.VALUE))

    try:
        loadhook.after_import(names[0], then)
        loadhook.after_import(names[1], then)
        loadhook.after_import(names[1], then)  # already watched: no second finder
        ours = [f for f in sys.meta_path if getattr(f, "fullname", None) in names]
        assert len(ours) == 2
        importlib.import_module(names[2])
        importlib.import_module(names[1])
        importlib.import_module(names[0])
        assert seen == [(names[1], 41), (names[0], 41)]
        assert not [f for f in sys.meta_path if getattr(f, "fullname", None) in names]
        loadhook.after_import(names[0], then)  # imported already: at once
        assert seen[-1] == (names[0], 41) and len(seen) == 3
    finally:
        sys.meta_path[:] = [f for f in sys.meta_path if getattr(f, "fullname", None) not in names]
        for n in names:
            sys.modules.pop(n, None)
