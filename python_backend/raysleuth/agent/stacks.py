"""Every thread's Python stack in this worker, read by the agent's own thread (issue 12).

`sys._current_frames()` works while the task thread waits in C (a collective, `ray.get`,
`time.sleep`) and needs no ptrace; the worker pays only for the walk, under the GIL. Runs inside
Ray workers: never raises, never prints, never imports anything the program has not.
"""

from __future__ import annotations

import linecache
import sys
import threading

MAX_FRAMES = 256
"""Frames kept per thread, innermost first (a deep recursion is cut, not copied whole)."""

MAX_CODE = 200
"""Characters of a frame's source line kept."""

OWN_PREFIX = "raysleuth-"
"""Names of the agent's own threads (the agent loop, the bounded-repr helper)."""


def _skipped(thread: threading.Thread | None, me: int) -> bool:
    """The agent's own threads and the debugger's: not the program's, and never where it hangs."""
    if thread is None:
        return False
    if thread.ident == me or thread.name.startswith(OWN_PREFIX):
        return True
    return bool(getattr(thread, "is_pydev_daemon_thread", False))


def _frames(frame) -> list[dict]:
    out: list[dict] = []
    f = frame
    while f is not None and len(out) < MAX_FRAMES:
        code = f.f_code
        line = f.f_lineno or code.co_firstlineno
        text = linecache.getline(code.co_filename, line).strip() if line else ""
        out.append(
            {
                "path": code.co_filename,
                "line": line,
                "function": code.co_name,  # as py-spy names it: both kinds of stack group alike
                "code": text[:MAX_CODE] or None,
            }
        )
        f = f.f_back
    return out


def dump_threads(skip_own: bool = True) -> list[dict]:
    """[{name, id, main, frames: [{path, line, function, code}]}], the main thread first.

    Frames are innermost first. With `skip_own`, the calling thread, the agent's threads and
    debugpy's are left out.
    """
    me = threading.get_ident()
    by_id = {t.ident: t for t in threading.enumerate()}
    main_id = threading.main_thread().ident
    out = []
    for tid, frame in sys._current_frames().items():  # noqa: SLF001 - the one API for this
        thread = by_id.get(tid)
        if skip_own and (tid == me or _skipped(thread, me)):
            continue
        out.append(
            {
                "name": thread.name if thread is not None else f"Thread-{tid}",
                "id": tid,
                "main": tid == main_id,
                "frames": _frames(frame),
            }
        )
    out.sort(key=lambda t: (not t["main"], t["name"]))
    return out
