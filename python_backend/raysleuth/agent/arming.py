"""Keeping the worker's armed set in step with the cluster's: the point specs the broker sent
(or left in Ray's KV), and when to arm them again (new set, rank or actor became known, a point
ruled itself out, a module or class loaded later).

Arming runs in the agent thread, or in Ray's loading thread when a class arrives (then it must
not wait for the agent thread: the scan never waits on Ray, so holding the lock there is safe),
or in the thread that reads a pickle when code arrives as data (datahook.py).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from raysleuth.agent.log import swallow
from raysleuth.shared import names

if TYPE_CHECKING:
    from raysleuth.agent.trigger import Trigger


def points_from_kv() -> dict | None:
    """The point set the broker left in Ray's internal KV, or None (no broker, or unreadable)."""
    try:
        import json

        from ray.experimental import internal_kv

        raw = internal_kv._internal_kv_get(names.POINTS_KV_KEY, namespace=names.NAMESPACE)
        return json.loads(raw) if raw else None
    except Exception:  # noqa: BLE001 - the registry sends the set with the next heartbeat anyway
        swallow("reading the point set from Ray's KV")
        return None


class Arming:
    """The point specs and the trigger that arms them. Methods return whether the armed set
    changed (the caller then reports at once)."""

    def __init__(self, identity, new_trigger, log, who) -> None:
        self._identity = identity
        """A callable: the identity a scope is matched against (node, actor, rank now)."""
        self._new_trigger = new_trigger
        """A callable making the trigger, when the first point arrives."""
        self._log = log
        """A callable returning the agent's logger."""
        self._who = who
        """A callable naming the worker in log lines."""
        self.points: list[dict] = []
        """The cluster's breakpoints, logpoints and snapshot points (specs from the registry)."""
        self.version = ""
        """The version of `points` (the registry's)."""
        self.trigger: Trigger | None = None
        """The light trigger (agent/trigger.py), created when the first point arrives."""
        self._key: tuple | None = None
        """(rank, actor class, actor name) the set was last armed for."""
        self._rearm = False
        self._heap_scan_due = False
        """Armed from modules only (a first task): the agent thread scans the heap next."""
        self._lock = threading.RLock()

    def take(self, version: str | None, points: list[dict] | None) -> bool:
        """A point set from the registry or the KV; False if this version is armed already (it
        may have been armed from Ray's KV: arming it again would rescan while that code runs)."""
        if version == self.version:
            return False
        self.points = list(points or [])
        self.version = version if version is not None else ""
        self._rearm = True
        return True

    def rearm_soon(self) -> None:
        """A point ruled itself out (rank known now): arm again at the next heartbeat."""
        self._rearm = True

    def arm_if_needed(self) -> bool:
        """Arm the points again when they changed, or the worker's rank or actor became known."""
        if not self.points and self.trigger is None:
            return False
        with self._lock:
            if self._heap_scan_due:
                self._rearm = True  # the full scan, from the agent thread
            return self._arm_locked()

    def arm_first_task(self, version: str | None, points: list[dict] | None) -> bool:
        """The first task's thread, before its code runs, with the set read from Ray's KV: arm
        the modules that have points and the functions rebuilt from pickles, not the whole heap
        (the code the task runs is armed by the load hooks as it arrives); the agent thread
        scans the heap at its next heartbeat."""
        with self._lock:
            if not self.take(version, points) or not self.points:
                return False
            return self._arm_locked(heap=False)

    def _arm_locked(self, heap: bool = True) -> bool:
        ident = self._identity()
        key = (ident.get("rank"), ident.get("actor_class"), ident.get("actor_name"))
        if not self._rearm and key == self._key:
            if self.trigger is not None and self.trigger.points:
                return self.trigger.arm_new_modules()
            return False
        self._rearm = False
        self._heap_scan_due = not heap
        self._key = key
        try:
            t = self.trigger = self.trigger or self._new_trigger()
            t.update(self.points, ident, heap=heap)
            who, armed, scan = self._who(), len(t.armed), t.scan_ms
            self._log().info("%s armed %d of %d points (scan %.1f ms)", who, armed, len(self.points), scan)
        except Exception:  # noqa: BLE001
            self._log().exception("arming failed")
        return True

    def code_loaded(self, obj) -> bool:
        """Ray loaded a class or function (loadhook): arm it before it runs.

        The agent thread may not have heard from the registry yet (a worker just started, or one
        Ray's pool started before the broker): the set is read from Ray's internal KV here.
        """
        data = points_from_kv()  # one GCS read, in this thread: no actor handle needed
        if data is not None and self.take(data.get("version"), data.get("points")):
            return self.arm_if_needed()  # arms the class just loaded too (a full scan)
        # The agent thread may have taken this version from the registry and be scanning right
        # now (or be about to): wait for its scan, or do it here, so the class is armed before
        # its first call.
        with self._lock:
            if self.points and (self._rearm or self.trigger is None):
                return self._arm_locked()
            t = self.trigger
            if t is None or not t.points:
                return False
            armed = t.code_loaded(obj)
            # Loading it may have imported modules (code pickled by reference, e.g. Tune's
            # trainable inside its wrapper class): their points too, before anything runs.
            return self._arm_locked() or armed

    def code_arrived(self, fn) -> bool:
        """cloudpickle rebuilt `fn` from a pickle (datahook): arm it if its file has a point.

        Runs for every function rebuilt while a set is known, so it never reads Ray's KV (the
        loadhook reads it when the task's own function or class loads, before the task runs) and
        takes the lock only for a function whose file has a point, or while a new set waits.
        """
        if not self.points:
            return False
        t = self.trigger
        if t is not None and not self._rearm:
            if not t.points or not t.points_for_file(fn.__code__.co_filename):
                return False
        with self._lock:
            if self._rearm or self.trigger is None:
                return self._arm_locked()  # a full scan: it finds `fn` too
            return self.trigger.code_loaded(fn)

    def modules_arrived(self) -> bool:
        """Reading a pickle imported modules (code pickled by reference): arm the points of
        their files, before that code can run."""
        if not self.points:
            return False
        t = self.trigger
        if t is not None and not self._rearm and not t.points:
            return False
        with self._lock:
            return self._arm_locked()  # a new set, else the modules not looked through yet
