"""The agent's line to the broker: the registry actor's handle, looked up lazily and again after
a failed call. Only the agent thread waits on it (and a failing task, for its crash record).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

from raysleuth.agent import taskgate
from raysleuth.shared import names

LOOKUP_RETRY_S = float(os.environ.get("RAYSLEUTH_LOOKUP_RETRY_S", "3.0"))
"""Seconds between looks for the registry actor while no broker runs."""

CALL_TIMEOUT_S = 10.0
"""Longest wait for one call to the registry; only the agent thread waits."""


class RegistryLink:
    """The registry actor's handle, or None while no broker runs."""

    def __init__(self, log, who) -> None:
        self._log = log
        """A callable returning the agent's logger (configured on first use)."""
        self._who = who
        """A callable naming the worker in log lines (`Agent[node=3f2a pid=4242 rank=3]`)."""
        self.handle = None
        """The registry actor, once found; None again after a call failed."""
        self._next_lookup = 0.0

    def look_now(self) -> None:
        """The next `lookup()` asks Ray at once instead of waiting for the retry time."""
        self._next_lookup = 0.0

    def lookup(self):
        """The registry's handle: cached, else asked from Ray at most every LOOKUP_RETRY_S."""
        if self.handle is not None:
            return self.handle
        now = time.monotonic()
        if now < self._next_lookup:
            return None
        self._next_lookup = now + LOOKUP_RETRY_S
        if not taskgate.task_ran():
            # Until Ray ran a task here, a submission from this thread aborts the process (see
            # taskgate.py); the first task wakes the agent.
            return None
        import ray

        try:
            self.handle = ray.get_actor(names.REGISTRY_ACTOR, namespace=names.NAMESPACE)
            self._log().info("%s found the registry", self._who())
        except ValueError:
            pass  # no broker runs now: look again later (not an error: the usual state)
        except Exception:  # noqa: BLE001
            self._log().exception("looking up the registry failed")
        return self.handle

    def call(self, method: str, *args, extra_timeout: float = 0.0, meanwhile=None):
        """Call the registry and wait for the answer; None if there is none or the call failed.
        `meanwhile`: (event, work) for answer_meanwhile."""

        registry = self.lookup()
        if registry is None:
            return None
        try:
            ref = getattr(registry, method).remote(*args)
            timeout = CALL_TIMEOUT_S + extra_timeout
            return answer(ref, timeout) if meanwhile is None else answer_meanwhile(ref, timeout, *meanwhile)
        except Exception as exc:  # noqa: BLE001 - the broker went away or is slow: look again
            self._log().info("registry call %s failed (%s); looking it up again", method, type(exc).__name__)
            self.handle = None
            self._next_lookup = 0.0
            return None

    def goodbye(self, worker_id: str) -> None:
        """Tell the registry this worker exits on purpose (at interpreter exit; 1 s at most)."""
        if self.handle is None:
            return
        try:
            answer(self.handle.goodbye.remote(worker_id, "exit"), 1.0)
        except Exception:  # noqa: BLE001 - at exit Ray may be gone already
            import logging

            from raysleuth.agent.log import swallow

            swallow("saying goodbye to the registry", level=logging.DEBUG)


def answer(ref, timeout: float):
    """The value of `ref`, waited for in Python (a future Ray completes from its own thread), not
    in `ray.get`: a thread blocked in Ray's `CoreWorker::Get` when the worker shuts down (its actor
    killed) makes Ray abort the exiting process (`counter_map.h:92 Check failed`, seen on 3.12)."""
    return ref.future().result(timeout=timeout)


def answer_meanwhile(ref, timeout: float, wake: threading.Event, work: Callable[[], float | None]):
    """`answer`, doing `work` while waiting: each time `wake` is set and when the seconds it
    returned last have passed (None: nothing to do until woken). The answer sets `wake` too."""
    fut = ref.future()
    fut.add_done_callback(lambda _f: wake.set())
    end = time.monotonic() + timeout
    while not fut.done():
        wake.clear()
        due = work()
        left = end - time.monotonic()
        if left <= 0:
            break
        wake.wait(left if due is None else min(left, due))
    return fut.result(timeout=0)
