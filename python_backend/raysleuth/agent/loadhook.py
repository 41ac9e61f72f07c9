"""Arm code the moment Ray loads it into a worker: an actor class, a remote function.

A worker started after a breakpoint was set gets the point with its first heartbeat; the class
its actor runs may arrive just after that. Ray loads every class and function through its
FunctionActorManager once per worker; wrapping those three methods lets the agent arm the new
code before its first call, at no cost per task.

The wrap must be in place before Ray's main thread loads the first class: `install_early()`
puts it there the moment `ray._private.function_manager` is imported (an import hook that
removes itself), so no load can start unwrapped. A class loaded unwrapped anyway (the agent
started late, by `raysleuth.init()` in a task) is reported when Ray asks its cache for it at
the next task.
"""

from __future__ import annotations

import functools
import sys

MODULE = "ray._private.function_manager"

_installed = False
"""Whether Ray's loaders are wrapped (once per process)."""


def swallow_late(what: str, *args) -> None:
    """`agent.log.swallow`, imported only when needed: the hooks load at interpreter start-up."""
    from raysleuth.agent.log import swallow

    swallow(what, *args)


def install_early(agent) -> None:
    """Wrap Ray's loaders now if Ray's function manager is imported, else as soon as it is.

    Safe from the interpreter's start-up hook: imports nothing of Ray.
    """
    if not _installed:
        after_import(MODULE, lambda module: install(agent, module))


def after_import(fullname: str, then) -> None:
    """Call `then(module)` right after module `fullname` has run: now if it is imported already,
    else from its import (a finder that leaves sys.meta_path once it has seen that import).

    Imports nothing. Every import the process makes meanwhile costs one string comparison.
    """
    module = sys.modules.get(fullname)
    if module is not None:
        then(module)
        return
    if not any(isinstance(f, _PostImportFinder) and f.fullname == fullname for f in sys.meta_path):
        sys.meta_path.insert(0, _PostImportFinder(fullname, then))


class _PostImportFinder:
    """Finds nothing itself: when `fullname` is imported, wraps its loader to call `then(module)`
    right after the module ran, then leaves sys.meta_path."""

    def __init__(self, fullname: str, then) -> None:
        self.fullname = fullname
        self.then = then
        self._busy = False

    def find_spec(self, fullname, path, target=None):
        if fullname != self.fullname or self._busy:
            return None
        self._busy = True
        try:
            spec = None
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
        except Exception:  # noqa: BLE001 - let the normal import machinery handle it
            swallow_late("finding the spec of %s", fullname)
            return None
        finally:
            self._busy = False
        loader = getattr(spec, "loader", None) if spec is not None else None
        if loader is None or not hasattr(loader, "exec_module"):
            return None
        then, finder = self.then, self
        original = loader.exec_module

        def exec_module(module):
            original(module)
            try:
                sys.meta_path.remove(finder)
            except ValueError:
                pass
            try:
                then(module)
            except Exception:  # noqa: BLE001 - never break the import
                swallow_late("hooking into %s", fullname)

        try:
            loader.exec_module = exec_module
        except Exception:  # noqa: BLE001 - a loader we cannot wrap: the agent thread wraps later
            swallow_late("wrapping the loader of %s", fullname)
            return None
        return spec


def install(agent, fm=None) -> None:
    global _installed
    if _installed:
        return
    fm = fm or sys.modules.get(MODULE)
    cls = getattr(fm, "FunctionActorManager", None)
    if cls is None:
        return
    _installed = True

    def loaded(obj) -> None:
        try:
            agent.code_loaded(obj)
        except Exception:  # noqa: BLE001 - never into Ray's loading
            swallow_late("arming code Ray loaded")

    def executions(manager) -> list:
        try:
            return [i.function for i in list(manager._function_execution_info.values())]
        except Exception:  # noqa: BLE001 - private attribute of Ray: no functions seen
            swallow_late("listing the functions Ray loaded")
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
