"""The checks of one node for `raysleuth doctor`: what Ray Sleuth needs there, checked there.

They run in the node relay (a Ray actor on every node, started by the raylet like any
worker, so it sees what the node's workers see); the broker adds its own. Every check is
{check, status, detail, hint}: status `ok`, `info`, `warn` or `fail`; a `fail` makes the command
exit 1. Never raises: a check that breaks is reported as failed.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
import time

CLOCK_SKEW_S = 1.0
"""A node clock this far from the broker's makes a cross-node timeline misleading."""

MIN_FREE_BYTES = 1 << 30
"""Free space under Ray's log folder below which agent logs and fault files may not fit."""


def check(name: str, status: str, detail: str, hint: str | None = None) -> dict:
    return {"check": name, "status": status, "detail": detail, "hint": hint}


def _python() -> dict:
    v = ".".join(map(str, sys.version_info[:3]))
    if sys.version_info >= (3, 12):
        return check("python", "ok", f"Python {v}: breakpoints use sys.monitoring (cheap while attached)")
    return check(
        "python",
        "warn",
        f"Python {v}: once debugpy attaches, it traces every line of the worker (about 2x slower)",
        "Python 3.12 or newer makes an attached worker run at nearly full speed.",
    )


def _ray() -> dict:
    try:
        import ray

        return check("ray", "ok", f"Ray {ray.__version__}")
    except Exception as exc:  # noqa: BLE001
        return check("ray", "fail", f"{type(exc).__name__}: {exc}", "Install Ray on this node.")


def _debugpy() -> dict:
    try:
        import debugpy

        return check("debugpy", "ok", f"debugpy {debugpy.__version__}")
    except Exception as exc:  # noqa: BLE001
        return check(
            "debugpy",
            "fail",
            f"{type(exc).__name__}: {exc}",
            "pip install debugpy (or raysleuth) on this node.",
        )


def _raylet_env(key: str) -> str | None:
    """`key` in the environment of this worker's parent, the raylet (what every worker it starts
    inherits); this process's own value where /proc cannot tell (the relay sets its own)."""
    try:
        with open(f"/proc/{os.getppid()}/environ", "rb") as f:
            for item in f.read().split(b"\0"):
                k, _, v = item.partition(b"=")
                if k.decode(errors="replace") == key:
                    return v.decode(errors="replace")
        return None
    except OSError:
        return os.environ.get(key)


def _agent() -> dict:
    pth = os.path.join(sysconfig.get_paths()["purelib"], "raysleuth.pth")
    has_pth = os.path.exists(pth)
    env = _raylet_env("RAYSLEUTH")
    if has_pth and env == "1":
        return check("agent", "ok", "workers start the agent: RAYSLEUTH=1 and raysleuth.pth are here")
    if has_pth:
        return check(
            "agent",
            "warn",
            f"RAYSLEUTH is {env!r} in this node's workers: only jobs that ask for the agent get it",
            "Start Ray with RAYSLEUTH=1 in its environment, or pass runtime_env="
            '{"worker_process_setup_hook": "raysleuth.agent.setup"} to ray.init.',
        )
    return check(
        "agent",
        "fail",
        f"raysleuth's start-up hook is not installed in {sysconfig.get_paths()['purelib']}",
        "pip install raysleuth into the Python that runs Ray on this node.",
    )


def _gpu() -> dict:
    from raysleuth import gpu

    why = gpu.unavailable()
    if why is not None:
        return check("gpu", "info", f"no GPU memory samples here: {why}")
    sample = gpu.sample() or {}
    n = len(sample.get("gpus") or [])
    return check("gpu", "ok", f"NVML works: {n} GPU(s) visible")


def _clock(broker_time: float | None) -> dict:
    if broker_time is None:
        return check("clock", "info", "not compared (no broker time given)")
    skew = time.time() - broker_time
    if abs(skew) <= CLOCK_SKEW_S:
        return check("clock", "ok", f"{skew:+.3f} s from the broker's clock")
    return check(
        "clock",
        "warn",
        f"{skew:+.1f} s from the broker's clock: events of this node sit off on the timeline",
        "Keep the nodes' clocks in sync (chrony or NTP).",
    )


def _logs() -> dict:
    from raysleuth.paths import ray_log_dir as _log_dir

    folder = _log_dir()
    probe = os.path.join(folder, f".raysleuth-doctor-{os.getpid()}")
    try:
        with open(probe, "w") as f:
            f.write("ok")
        os.remove(probe)
    except OSError as exc:
        return check(
            "logs",
            "fail",
            f"cannot write in {folder}: {exc}",
            "Agent logs and crash evidence (faulthandler) are written there: make it writable.",
        )
    free = shutil.disk_usage(folder).free
    if free < MIN_FREE_BYTES:
        return check(
            "logs",
            "warn",
            f"{folder}: only {free >> 20} MiB free",
            "Free some space: a full disk loses agent logs and crash evidence.",
        )
    return check("logs", "ok", f"{folder} is writable, {free >> 30} GiB free")


def node_checks(broker_time: float | None = None) -> list[dict]:
    """The checks of the node this runs on."""
    out = []
    for fn, args in (
        (_python, ()),
        (_ray, ()),
        (_debugpy, ()),
        (_agent, ()),
        (_gpu, ()),
        (_clock, (broker_time,)),
        (_logs, ()),
    ):
        try:
            out.append(fn(*args))
        except Exception as exc:  # noqa: BLE001 - a broken check is a failed check, not a crash
            out.append(check(fn.__name__.strip("_"), "fail", f"the check itself failed: {exc!r}"))
    return out
