"""When the agent's own thread may submit a Ray task (the registry calls): once Ray ran a task here.

Ray's core worker builds every task spec with the runtime env of the worker's current task
(`CoreWorker::OverrideTaskOrActorRuntimeEnvInfo`). A worker process gets that env when Ray sets
its first task; until then it is a null pointer, and Ray 2.4x-2.60 abort the whole process on a
submission from any thread (`shared_lru.h: Check failed: value != nullptr`). Prestarted and idle
pool workers are in that state, for seconds or for their whole life. A driver takes its job's env
instead and may always submit.

Ray calls `FunctionActorManager.get_execution_info` (and `load_actor_class` for an actor) for
every task, after it set the task: wrapping them tells the first task apart at no cost per task
(the wrap puts the original back once it fired).
"""

from __future__ import annotations

import functools
import sys
import threading

MODULE = "ray._private.function_manager"
WRAPPED = ("get_execution_info", "load_actor_class")

_ran = threading.Event()
"""Set once Ray began a task in this process (or this process is a driver)."""
_watchers: list = []
"""Callables told once, from the task's thread, when the first task begins."""
_lock = threading.Lock()
_installed = False


def task_ran() -> bool:
    """True once Ray has begun a task in this process (its task context is set for good)."""
    return _ran.is_set()


def mark_driver() -> None:
    """A driver builds specs from its job's config: it may submit from any thread at any time."""
    _mark()


def mark_if_in_task() -> None:
    """Called from a user's thread (`raysleuth.init()` in a task): a task running in this thread
    means Ray set the task context before our wrap was there."""
    try:
        import ray

        if ray.get_runtime_context().get_task_id() is not None:
            _mark()
    except Exception:  # noqa: BLE001 - not connected, or not in a task: the wrap tells later
        from raysleuth.agent.log import swallow

        swallow("asking Ray whether a task runs in this thread")


def on_first_task(callback) -> None:
    """Call `callback()` when the first task begins (at once if it has begun)."""
    with _lock:
        if not _ran.is_set():
            _watchers.append(callback)
            return
    callback()


def install_early() -> None:
    """Wrap Ray's per-task lookups now, or the moment Ray's function manager is imported.

    Safe from the interpreter's start-up hook: imports nothing of Ray.
    """
    from raysleuth.agent.loadhook import after_import

    if not _installed:
        after_import(MODULE, install)


def install(module=None) -> None:
    global _installed
    module = module or sys.modules.get(MODULE)
    cls = getattr(module, "FunctionActorManager", None)
    if cls is None or _installed:
        return
    _installed = True
    for name in WRAPPED:
        original = cls.__dict__.get(name)
        if original is not None:
            setattr(cls, name, _wrap(cls, name, original))


def _wrap(cls, name: str, original):
    @functools.wraps(original)
    def first_call(self, *args, **kwargs):
        _mark()
        if cls.__dict__.get(name) is first_call:
            setattr(cls, name, original)  # every later task calls Ray's own method directly
        return original(self, *args, **kwargs)

    return first_call


def _mark() -> None:
    if _ran.is_set():
        return
    with _lock:
        if _ran.is_set():
            return
        _ran.set()
        watchers = list(_watchers)
        _watchers.clear()
    for callback in watchers:
        try:
            callback()
        except Exception:  # noqa: BLE001 - never into Ray's task
            from raysleuth.agent.log import swallow

            swallow("telling the agent the first task began")
