"""Arm code that reaches a worker as data: functions and classes rebuilt from a pickle (#11).

Ray's function manager (loadhook.py) sees remote functions and actor classes only. A Ray Data
UDF (function or callable class), a Tune trainable or a Ray Train loop travels inside a task's
arguments, an object or Ray's KV, and cloudpickle rebuilds it in the worker:

- by value (functions of `__main__`, lambdas, closures, modules registered with
  `register_pickle_by_value`): every function, methods of a rebuilt class included, is made by
  `ray.cloudpickle.cloudpickle._make_function` and completed by `_function_setstate`, which the
  pickle names as a global. Wrapping `_function_setstate` in that module hands each rebuilt
  function to the agent the moment it is whole, before anything can call it.
- by reference: the pickle names `module.qualname`; unpickling imports the module if this
  worker has not yet. Ray reads every task argument and object through
  `SerializationContext._deserialize_pickle5_data`; the wrap compares `len(sys.modules)` before
  and after, and only when modules arrived are they looked through (`Trigger.arm_new_modules`).
  Code of a module imported before the points were armed is found by the arming scan itself.

Both wraps go in the moment `ray._private.serialization` is imported (the import watch of
loadhook.py), before Ray can read a first argument, and only in processes with an agent.

Cost when idle (no point in the cluster, or none for this worker): per rebuilt function, one
Python call and a test of the agent's point list; per argument or object read, one Python call
and two `len()`s. Nothing is scanned and no lock is taken. Measured here (Ray 2.60, best of 15
interleaved runs): about 0.25 µs added per argument read on 3.11 and 0.29 µs on 3.12 (a Ray task
round trip costs hundreds of µs), and no difference above noise (under 0.4 µs) per rebuilt
function, whose rebuild itself costs about 6 µs. Every rebuilt function is also kept in a weak
set (for workers that freeze their heap, see `rebuilt`): about 0.4 µs more per rebuild on 3.11
(4.7 → 5.1 µs, best of 15). With points armed, a function whose file has
none costs one dict lookup more; only one whose file has a point goes through the trigger.

Not seen at once: a module first imported by a pickle read outside Ray's reader (Tune's
registry calls `ray.cloudpickle.loads` itself) is armed at the next heartbeat (`arm_new_modules`).
Rejected: an audit hook (`pickle.find_class`, `import`) cannot be removed and runs for every
audited event of the process; wrapping `ray.cloudpickle.loads` replaces a builtin that pickles
by name (`(loads, (data,))` reducers) with a function that does not.

Never raises into Ray's deserialization or the user's task, never prints.
"""

from __future__ import annotations

import functools
import sys
import types
import weakref

from raysleuth.agent import loadhook

MODULE = "ray._private.serialization"
"""Imported by Ray before any argument is read; it imports `ray.cloudpickle` first."""

CLOUDPICKLE = "ray.cloudpickle.cloudpickle"

_installed = False
"""Whether the wraps are in place (once per process)."""

rebuilt: weakref.WeakSet = weakref.WeakSet()
"""Every function rebuilt from a pickle that is still alive: the arming scan looks here too,
since a process that called `gc.freeze()` (Ray Serve's replicas do after start-up) hides them
from `gc.get_objects()`."""


def install_early(agent) -> None:
    """Put the wraps in place now if Ray's serialization is imported, else the moment it is.

    Safe from the interpreter's start-up hook: imports nothing of Ray.
    """
    if not _installed:
        loadhook.after_import(MODULE, lambda module: install(agent, module))


def install(agent, serialization=None) -> bool:
    """Wrap cloudpickle's function setter and Ray's pickle reader; False if Ray has neither."""
    global _installed
    if _installed:
        return True
    serialization = serialization or sys.modules.get(MODULE)
    impl = sys.modules.get(CLOUDPICKLE)
    context = getattr(serialization, "SerializationContext", None)
    setstate = getattr(impl, "_function_setstate", None)
    reader = getattr(context, "_deserialize_pickle5_data", None)
    if setstate is None and reader is None:
        return False
    _installed = True
    if setstate is not None:
        setattr(impl, "_function_setstate", wrap_setstate(setstate, agent))  # noqa: B010
    if reader is not None:
        setattr(context, "_deserialize_pickle5_data", wrap_reader(reader, agent))  # noqa: B010
    return True


def wrap_setstate(original, agent):
    """cloudpickle's `_function_setstate`, then the rebuilt function to the agent if it has points.

    `functools.wraps` keeps `__module__` and `__qualname__`: a pickle made in this process still
    names `ray.cloudpickle.cloudpickle._function_setstate`, which resolves to this wrap here and
    to the original anywhere else.
    """
    arming = agent.arming
    remember = rebuilt.add

    @functools.wraps(original)
    def _function_setstate(obj, state):
        original(obj, state)
        try:
            remember(obj)
        except TypeError:  # not weak-referenceable: not a function, nothing to arm
            pass
        if arming.points:  # idle workers stop here
            try:
                if type(obj) is types.FunctionType:
                    agent.code_arrived(obj)
            except Exception:  # noqa: BLE001 - never into Ray's deserialization
                loadhook.swallow_late("arming a function rebuilt from a pickle")

    return _function_setstate


def wrap_reader(original, agent):
    """Ray's `_deserialize_pickle5_data`, then a look at the modules it imported, if any."""
    arming = agent.arming

    @functools.wraps(original)
    def _deserialize_pickle5_data(self, *args, **kwargs):
        before = len(sys.modules)
        obj = original(self, *args, **kwargs)
        if len(sys.modules) != before and arming.points:
            try:
                agent.modules_arrived()
            except Exception:  # noqa: BLE001 - never into Ray's deserialization
                loadhook.swallow_late("arming modules imported by a pickle")
        return obj

    return _deserialize_pickle5_data
