"""Arm code the moment Ray loads it into a worker: an actor class, a remote function.

A worker started after a breakpoint was set gets the point with its first heartbeat; the class
its actor runs may arrive just after that. Ray loads every class and function through its
FunctionActorManager once per worker; wrapping those three methods lets the agent arm the new
code before its first call, at no cost per task.
"""

from __future__ import annotations

import functools
import sys

_installed = False


def install(agent) -> None:
    global _installed
    if _installed:
        return
    fm = sys.modules.get("ray._private.function_manager")
    cls = getattr(fm, "FunctionActorManager", None)
    if cls is None:
        return
    _installed = True

    def loaded(obj) -> None:
        try:
            agent.code_loaded(obj)
        except Exception:  # noqa: BLE001 - never into Ray's loading
            pass

    def executions(manager) -> list:
        try:
            return [i.function for i in list(manager._function_execution_info.values())]
        except Exception:  # noqa: BLE001
            return []

    seen: set[int] = set()

    def wrap_class_loader(orig):
        @functools.wraps(orig)
        def load_actor_class(self, *args, **kwargs):
            actor_class = orig(self, *args, **kwargs)
            if actor_class is not None and id(actor_class) not in seen:  # Ray calls it per task
                seen.add(id(actor_class))
                loaded(actor_class)
            return actor_class

        return load_actor_class

    def wrap_function_loader(orig):
        @functools.wraps(orig)
        def load_function(self, *args, **kwargs):
            before = set(map(id, executions(self)))
            result = orig(self, *args, **kwargs)
            for fn in executions(self):
                if id(fn) not in before:
                    loaded(fn)
            return result

        return load_function

    for name, wrap in (
        ("load_actor_class", wrap_class_loader),
        ("fetch_and_register_remote_function", wrap_function_loader),
        ("_load_function_from_local", wrap_function_loader),
    ):
        orig = getattr(cls, name, None)
        if orig is not None:
            setattr(cls, name, wrap(orig))
