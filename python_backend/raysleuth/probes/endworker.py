"""End a Ray worker process of this node at the broker's request (`POST /v1/workers/{id}/kill`,
run in the node's relay): for a worker whose C code holds its GIL, where nothing gentler works.
Only a process of our own uid whose title Ray set (`ray::…`) is ended: a pid reused since by
another program is refused."""

from __future__ import annotations

import os
import signal

TITLE_PREFIX = b"ray::"
"""How Ray titles every worker process (`ray::IDLE`, `ray::Trainer.step`)."""


def end_ray_worker(pid: int) -> dict:
    """SIGKILL `pid` if it is a Ray worker of ours: {ok} or {ok: False, error, hint}."""
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 1:
        return {"ok": False, "error": f"no such pid {pid!r}", "hint": None}
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            title = f.read(256)
        uid = os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return {"ok": False, "error": f"pid {pid} is gone", "hint": "It ended already."}
    if not title.startswith(TITLE_PREFIX) or uid != os.getuid():
        return {
            "ok": False,
            "error": f"pid {pid} is not a Ray worker of this user any more",
            "hint": "The worker ended and its pid went to another program: `raysleuth list`.",
        }
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError as exc:
        return {"ok": False, "error": f"cannot end pid {pid}: {exc.strerror}", "hint": None}
    return {"ok": True}
