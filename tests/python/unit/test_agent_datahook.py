"""Code that arrives as data (#11): a function or class rebuilt from a pickle is armed before its
first call, by value (cloudpickle's `_function_setstate`) or by reference (a module imported
while Ray reads a pickle); an agent with no points does nothing more than one test.

In this process, with the real agent, arming and trigger; no Ray cluster. The cases that need
Ray's cloudpickle are skipped where Ray is not installed.
"""

from __future__ import annotations

import gc
import importlib.util
import logging
import pickle
import sys
import uuid

import pytest
from helpers import run_probe

from raysleuth.agent import core, datahook

UDFS = """\
def double(x):
    y = x * 2  # @bp double
    return y


class Scale:
    def __init__(self, k):
        self.k = k

    def __call__(self, x):
        y = x * self.k  # @bp scale
        return y
"""
DOUBLE_LINE, SCALE_LINE = (
    next(i for i, text in enumerate(UDFS.splitlines(), 1) if f"# @bp {m}" in text)
    for m in ("double", "scale")
)


class TestAgent(core.Agent):
    """The real agent (arming, trigger, code_arrived), without Ray: a fixed identity, and the
    logpoint lines it would send kept here."""

    __test__ = False

    def __init__(self) -> None:
        super().__init__("setup_hook")
        self.emitted: list[tuple[str, dict]] = []
        self.arrived = 0

    def identity(self) -> dict:
        return {"rank": 0, "node_id": "ab12", "actor_class": None}

    def emit(self, kind, payload) -> None:
        self.emitted.append((kind, payload))

    def code_arrived(self, fn) -> None:
        self.arrived += 1
        super().code_arrived(fn)

    def logs(self) -> list[str]:
        return [p["message"] for k, p in self.emitted if k == "log"]

    def set_points(self, *specs) -> None:
        self.arming.take(uuid.uuid4().hex, list(specs))
        self.arming.arm_if_needed()


@pytest.fixture
def agent(monkeypatch):
    monkeypatch.setattr(core, "_agent_logger", lambda: logging.getLogger("test-datahook"))
    a = TestAgent()
    yield a
    if a.trigger is not None:
        a.trigger.disarm_all()


@pytest.fixture
def udfs(tmp_path, monkeypatch):
    """A module of UDFs in its own file, importable by name (the test removes it again)."""
    name = f"rs_udfs_{uuid.uuid4().hex[:8]}"
    path = tmp_path / f"{name}.py"
    path.write_text(UDFS)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name, str(path)
    sys.modules.pop(name, None)


def import_file(name: str, path: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def logpoint(pid: str, path: str, line: int, message: str) -> dict:
    return {"id": pid, "path": path, "line": line, "logMessage": message}


@pytest.fixture
def ray_cloudpickle(monkeypatch, agent):
    """Ray's cloudpickle with `_function_setstate` wrapped for `agent`, as datahook installs it."""
    cp = pytest.importorskip("ray.cloudpickle")
    impl = sys.modules[datahook.CLOUDPICKLE]
    monkeypatch.setattr(impl, "_function_setstate", datahook.wrap_setstate(impl._function_setstate, agent))
    return cp


def by_value(cp, name: str, path: str, make) -> bytes:
    """Pickle `make(module)` by value (as cloudpickle does for `__main__`), then drop the module:
    what the worker gets is only the pickle."""
    module = import_file(name, path)
    cp.register_pickle_by_value(module)
    try:
        return cp.dumps(make(module))
    finally:
        cp.unregister_pickle_by_value(module)
        sys.modules.pop(name, None)
        del module
        gc.collect()


def test_function_rebuilt_by_value_fires_its_logpoint_on_first_call(agent, udfs, ray_cloudpickle):
    name, path = udfs
    data = by_value(ray_cloudpickle, name, path, lambda m: [m.double])
    agent.set_points(logpoint("d", path, DOUBLE_LINE, "double {x}"))
    (double,) = ray_cloudpickle.loads(data)
    assert double(21) == 42
    assert agent.logs() == ["double 21"]


def test_callable_class_rebuilt_by_value_has_its_method_armed(agent, udfs, ray_cloudpickle):
    name, path = udfs
    data = by_value(ray_cloudpickle, name, path, lambda m: m.Scale(3))
    agent.set_points(logpoint("s", path, SCALE_LINE, "scale {x}*{self.k}"))
    scale = ray_cloudpickle.loads(data)
    assert scale(5) == 15
    assert agent.logs() == ["scale 5*3"]


def test_each_copy_rebuilt_from_a_new_pickle_fires(agent, udfs, ray_cloudpickle):
    """Every task that gets the UDF by value rebuilds its own copy: each must fire."""
    name, path = udfs
    data = by_value(ray_cloudpickle, name, path, lambda m: [m.double])
    agent.set_points(logpoint("d", path, DOUBLE_LINE, "double {x}"))
    first, second = ray_cloudpickle.loads(data)[0], ray_cloudpickle.loads(data)[0]
    assert first is not second and (first(1), second(2)) == (2, 4)
    assert agent.logs() == ["double 1", "double 2"]


def test_without_the_hook_the_rebuilt_function_runs_unarmed(agent, udfs, monkeypatch):
    """The control: the armed set alone does not reach code rebuilt after it was armed."""
    cp = pytest.importorskip("ray.cloudpickle")
    impl = sys.modules[datahook.CLOUDPICKLE]
    original = getattr(impl._function_setstate, "__wrapped__", impl._function_setstate)
    monkeypatch.setattr(impl, "_function_setstate", original)
    name, path = udfs
    data = by_value(cp, name, path, lambda m: [m.double])
    agent.set_points(logpoint("d", path, DOUBLE_LINE, "double {x}"))
    (double,) = cp.loads(data)
    assert double(21) == 42
    assert agent.logs() == []


def test_idle_agent_only_tests_its_point_list(agent, udfs, ray_cloudpickle):
    name, path = udfs
    data = by_value(ray_cloudpickle, name, path, lambda m: [m.double])
    (double,) = ray_cloudpickle.loads(data)
    assert double(1) == 2
    assert agent.arrived == 0 and agent.trigger is None


def test_function_of_a_file_without_points_goes_no_further(agent, udfs, ray_cloudpickle, tmp_path):
    name, path = udfs
    data = by_value(ray_cloudpickle, name, path, lambda m: [m.double])
    agent.set_points(logpoint("o", str(tmp_path / "other.py"), 3, "other"))
    calls = []
    agent.trigger.code_loaded = lambda obj: calls.append(obj)
    (double,) = ray_cloudpickle.loads(data)
    assert double(2) == 4
    assert agent.arrived == 1 and calls == []


def test_a_pickle_made_with_the_hook_loads_without_it(agent, udfs, ray_cloudpickle, monkeypatch):
    """The wrap keeps the name the pickle records: a process without it rebuilds with its own."""
    name, path = udfs
    data = by_value(ray_cloudpickle, name, path, lambda m: [m.double])
    impl = sys.modules[datahook.CLOUDPICKLE]
    assert b"ray.cloudpickle.cloudpickle" in data and b"_function_setstate" in data
    monkeypatch.setattr(impl, "_function_setstate", impl._function_setstate.__wrapped__)
    (double,) = pickle.loads(data)
    assert double(4) == 8 and agent.arrived == 0


PROBE = """
import json, sys
from raysleuth.agent import datahook, loadhook

class Agent:
    class arming:
        points = []

agent = Agent()
{before}
loadhook.install_early(agent)
datahook.install_early(agent)
import ray
from ray._private import serialization
from ray.cloudpickle import cloudpickle as impl
print(json.dumps({{
    "setstate": hasattr(impl._function_setstate, "__wrapped__"),
    "reader": hasattr(serialization.SerializationContext._deserialize_pickle5_data, "__wrapped__"),
    "finders_left": [type(f).__name__ for f in sys.meta_path if type(f).__name__ == "_PostImportFinder"],
}}))
"""


@pytest.mark.parametrize("before", ["", "import ray"])
def test_installed_before_ray_reads_a_first_argument(before):
    pytest.importorskip("ray")
    res = run_probe(PROBE.format(before=before))
    assert res == {"setstate": True, "reader": True, "finders_left": []}


def reader_of(agent):
    """Ray's `_deserialize_pickle5_data` stand-in (plain pickle), wrapped as datahook wraps it."""

    class Context:
        def _deserialize_pickle5_data(self, data, tensors=None):
            return pickle.loads(data)

    Context._deserialize_pickle5_data = datahook.wrap_reader(Context._deserialize_pickle5_data, agent)
    return Context()


def by_reference(name: str, path: str, attr: str) -> bytes:
    """A pickle that names `module.attr`, with the module then gone from this process."""
    module = import_file(name, path)
    data = pickle.dumps(getattr(module, attr))
    sys.modules.pop(name, None)
    del module
    gc.collect()
    return data


def test_module_imported_by_a_by_reference_pickle_is_armed_before_the_call(agent, udfs):
    name, path = udfs
    data = by_reference(name, path, "double")
    agent.set_points(logpoint("d", path, DOUBLE_LINE, "ref {x}"))
    assert agent.trigger.armed == set()  # its code is nowhere in the process yet
    double = reader_of(agent)._deserialize_pickle5_data(data)
    assert double(5) == 10
    assert agent.logs() == ["ref 5"]


def test_class_imported_by_reference_is_armed(agent, udfs):
    name, path = udfs
    data = by_reference(name, path, "Scale")
    agent.set_points(logpoint("s", path, SCALE_LINE, "ref {x}"))
    cls = reader_of(agent)._deserialize_pickle5_data(data)
    assert cls(2)(7) == 14
    assert agent.logs() == ["ref 7"]


def test_reads_that_import_nothing_do_not_look_for_modules(agent, udfs, monkeypatch):
    name, path = udfs
    agent.set_points(logpoint("d", path, DOUBLE_LINE, "x"))
    looked = []
    monkeypatch.setattr(agent.arming, "modules_arrived", lambda: looked.append(1) or False)
    assert reader_of(agent)._deserialize_pickle5_data(pickle.dumps({"a": [1, 2]})) == {"a": [1, 2]}
    assert looked == []


def test_hook_failure_never_reaches_the_reader(agent, udfs, monkeypatch):
    name, path = udfs
    data = by_reference(name, path, "double")
    agent.set_points(logpoint("d", path, DOUBLE_LINE, "x"))

    def broken():
        raise RuntimeError("arming broke")

    monkeypatch.setattr(agent.arming, "modules_arrived", broken)
    assert reader_of(agent)._deserialize_pickle5_data(data)(3) == 6


@pytest.fixture
def frozen_heap():
    """What Ray Serve's replicas do once started: `gc.freeze()`, which hides every object made so
    far from `gc.get_objects()` (the arming scan's first source)."""
    yield gc.freeze
    gc.unfreeze()


def test_a_class_rebuilt_before_any_point_is_armed_in_a_frozen_heap(
    agent, udfs, ray_cloudpickle, frozen_heap
):
    name, path = udfs
    data = by_value(ray_cloudpickle, name, path, lambda m: m.Scale(3))
    scale = ray_cloudpickle.loads(data)  # no point yet: an idle replica rebuilds its class
    frozen_heap()
    assert not any(o is type(scale).__call__ for o in gc.get_objects())
    agent.set_points(logpoint("s", path, SCALE_LINE, "scale {x}*{self.k}"))
    assert scale(5) == 15
    assert agent.logs() == ["scale 5*3"]


def test_a_module_function_is_armed_in_a_frozen_heap(agent, udfs, frozen_heap):
    name, path = udfs
    module = import_file(name, path)
    frozen_heap()
    agent.set_points(logpoint("d", path, DOUBLE_LINE, "double {x}"))
    assert module.double(21) == 42
    assert agent.logs() == ["double 21"]


def test_a_heartbeat_during_the_import_does_not_hide_the_module(agent, udfs, monkeypatch):
    """CI race: the agent thread's heartbeat looked through the module while a task's pickle read
    was still running its body (in `sys.modules`, no function yet) and marked it done, so the
    read's own look skipped it and the task's logpoint never fired. The look waits for the body."""
    import threading
    import types

    name, path = udfs
    hook = types.ModuleType(f"{name}_pause")
    hook.started, hook.go = threading.Event(), threading.Event()
    hook.pause = lambda: (hook.started.set(), hook.go.wait(10))
    monkeypatch.setitem(sys.modules, hook.__name__, hook)
    head = f"import sys\nsys.modules[{hook.__name__!r}].pause()\n"
    with open(path, "w") as f:
        f.write(head + UDFS)
    line = DOUBLE_LINE + head.count("\n")
    data = f"c{name}\ndouble\n.".encode()  # a pickle naming name.double (protocol 0's GLOBAL)
    agent.set_points(logpoint("d", path, line, "ref {x}"))
    got = {}

    def read():  # the task's thread: Ray reads an argument that names name.double
        got["fn"] = reader_of(agent)._deserialize_pickle5_data(data)

    reader_thread = threading.Thread(target=read)
    reader_thread.start()
    assert hook.started.wait(10), "the import never began"
    agent.arming.arm_if_needed()  # the agent thread's heartbeat, while the body runs
    hook.go.set()
    reader_thread.join(10)
    assert got["fn"](5) == 10
    assert agent.logs() == ["ref 5"]


def test_the_first_task_arms_modules_at_once_and_leaves_the_heap_scan_to_the_agent(agent, udfs):
    """#22: a worker's first task reads the set from Ray's KV and arms it in its own thread; it
    looks only through the modules with points (what the task can call), not the whole heap,
    which the agent thread scans at its next heartbeat."""
    name, path = udfs
    module = import_file(name, path)
    made = {}
    exec(compile(UDFS, path, "exec"), made)  # the same file's code, reachable from no module
    point = logpoint("d", path, DOUBLE_LINE, "double {x}")
    assert agent.arming.arm_first_task("v1", [point])
    assert module.double(1) == 2 and made["double"](2) == 4
    assert agent.logs() == ["double 1"]  # the module's function fired; the stray one is unarmed
    assert agent.arming.arm_if_needed()  # the agent thread's heartbeat: the heap scan
    assert made["double"](3) == 6
    assert agent.logs() == ["double 1", "double 3"]
    assert not agent.arming.arm_first_task("v1", [point])  # the same set is not armed twice
