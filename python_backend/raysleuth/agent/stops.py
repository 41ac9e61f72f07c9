"""Whether this worker is stopped, and where: written by the debugger (a breakpoint, a pause)
and the post-mortem hold, read by every report. Light on purpose: the agent reads it on each
heartbeat, and an idle worker never imports the debugger (debugpy's glue costs ~50 ms)."""

from __future__ import annotations

import threading

_paused_at: dict | None = None
"""{path, line, reason[, breakpoint]} while a thread of this worker is stopped."""

_paused_thread: int | None = None
"""Ident of the thread that is stopped (evaluate runs in its frame)."""

_paused_frame = None
"""The user's frame the stopped thread stopped at, where the stop knows it: evaluate runs there.
The thread's innermost frames are not that frame while it waits: Ray's own call that counts it
paused (a GCS request, slow under load) runs inside the wait."""

crashed: dict | None = None
"""{crash, path, line, reason, held_until} while this worker is held after a crash."""


class WaitCancel(threading.Event):
    """A wait for a debugger that ends early: `resumed` tells it apart from an attach."""

    resumed = False


_waiting: set[WaitCancel] = set()
"""One per thread waiting for a debugger (debugger.wait_for_client); set by `resume_waiting()`."""


def set_paused(where: dict | None, frame=None) -> None:
    """Note that the calling thread stops at `where` ({path, line, reason}) in the user's `frame`
    (if known), or runs again (None)."""
    global _paused_at, _paused_thread, _paused_frame
    _paused_at = where
    _paused_thread = threading.get_ident() if where is not None else None
    _paused_frame = frame if where is not None else None


def paused_at() -> dict | None:
    """Where this worker is stopped now (a copy), or None."""
    where = _paused_at
    return dict(where) if where is not None else None


def paused_thread() -> int | None:
    """The ident of the stopped thread, or None (paused from the editor, or stepping)."""
    return _paused_thread


def paused_frame():
    """The user's frame the stopped thread stopped at, or None (not known, or not stopped)."""
    return _paused_frame


def set_crashed(held: dict | None) -> None:
    global crashed
    crashed = held


def new_wait() -> WaitCancel:
    ev = WaitCancel()
    _waiting.add(ev)
    return ev


def wait_ended(ev: WaitCancel) -> None:
    _waiting.discard(ev)


def resume_one(ev: WaitCancel) -> None:
    """Let one waiting thread go on without a debugger (pydevd sets the event itself on attach:
    `resumed` tells the two apart)."""
    ev.resumed = True
    ev.set()


def resume_waiting() -> int:
    """Let every thread that waits for a debugger go on without one ("Continue all paused", or
    the watchdog when the broker is gone). Returns how many there were."""
    evs = list(_waiting)
    for ev in evs:
        resume_one(ev)
    return len(evs)
