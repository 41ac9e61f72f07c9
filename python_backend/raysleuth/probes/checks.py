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
import tempfile
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


HOOK_PROBE = """
import json, os, sys
ran = "raysleuth._activate" in sys.modules
given = set(os.environ.get("PYTHONPATH", "").split(os.pathsep))  # never site dirs by themselves
pth = [p for p in sys.path if p and os.path.isfile(os.path.join(p, "raysleuth.pth"))]
pth.sort(key=lambda p: p in given)
print(json.dumps({"ran": ran, "pth": pth}))
"""
"""Run by this node's Python with RAYSLEUTH=1, as a worker starts: whether raysleuth.pth ran at
start-up (it imports raysleuth._activate, which starts nothing outside a Ray worker), and where
raysleuth.pth lies on the path."""


def hook_at_startup(python: str | None = None, timeout: float = 30.0) -> dict:
    """{ran, pth: [folders], error}: what a fresh `python` does with the start-up hook. Asked of
    the interpreter itself, so every way it can be installed counts: the interpreter's
    site-packages, the user's site dir, a folder added by `site.addsitedir` (a .pth that reaches
    another virtualenv's packages), a `sitecustomize`."""
    import json
    import subprocess

    env = dict(os.environ, RAYSLEUTH="1")
    try:
        out = subprocess.run(
            [python or sys.executable, "-c", HOOK_PROBE],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            cwd=tempfile.gettempdir(),  # not the worker's folder: nothing there shadows a module
        )
        found = json.loads(out.stdout.strip().splitlines()[-1])
        errors = [ln for ln in out.stderr.splitlines() if "raysleuth" in ln or "Error processing" in ln]
        return {"ran": bool(found["ran"]), "pth": list(found["pth"]), "error": "; ".join(errors[:2]) or None}
    except Exception as exc:  # noqa: BLE001 - a check that cannot run says so
        return {"ran": False, "pth": [], "error": f"{type(exc).__name__}: {exc}"}


def _where(folder: str) -> str:
    """How a folder holding raysleuth.pth is a site dir of this Python, in words."""
    import site

    norm = os.path.realpath(folder)
    if norm == os.path.realpath(sysconfig.get_paths()["purelib"]):
        return f"raysleuth.pth in the interpreter's site-packages ({folder})"
    user = getattr(site, "getusersitepackages", lambda: None)()
    if user and norm == os.path.realpath(user):
        return f"raysleuth.pth in the user's site dir ({folder})"
    return f"raysleuth.pth in {folder}, a site dir added by site.addsitedir"


def _agent(env=None, probe=None) -> dict:
    """How the agent gets into this node's workers: the start-up hook as this node's Python runs
    it (`probe()`: hook_at_startup), and RAYSLEUTH in the raylet's environment (`env(key)`)."""
    env = env or _raylet_env
    found = (probe or hook_at_startup)()
    purelib = sysconfig.get_paths()["purelib"]
    flag = env("RAYSLEUTH")
    if found["ran"]:
        where = (
            _where(found["pth"][0]) if found["pth"] else "a start-up hook outside sys.path (sitecustomize?)"
        )
        if flag == "1":
            return check("agent", "ok", f"workers start the agent: RAYSLEUTH=1, {where}")
        return check(
            "agent",
            "warn",
            f"{where}, but RAYSLEUTH is {flag!r} in this node's workers: only jobs that ask for the "
            "agent get it",
            "Start Ray with RAYSLEUTH=1 in its environment, or pass runtime_env="
            '{"worker_process_setup_hook": "raysleuth.agent.setup"} to ray.init.',
        )
    if found["pth"]:
        return check(
            "agent",
            "fail",
            f"raysleuth.pth is in {found['pth'][0]}, but Python does not run it at start-up"
            + (f" ({found['error']})" if found["error"] else ": that folder is on sys.path, not a site dir"),
            f"Add a .pth file to {purelib} with the line: import site; site.addsitedir("
            f"{found['pth'][0]!r}) (a plain path line does not run the .pth files there), or pip "
            "install raysleuth into this Python.",
        )
    return check(
        "agent",
        "fail",
        f"raysleuth's start-up hook is not installed for {sys.executable} (no raysleuth.pth in its "
        f"site dirs: {purelib} or one added by site.addsitedir)"
        + (f"; {found['error']}" if found["error"] else ""),
        "pip install raysleuth into the Python that runs Ray on this node, or pass runtime_env="
        '{"worker_process_setup_hook": "raysleuth.agent.setup"} to ray.init.',
    )


def _gpu() -> dict:
    from raysleuth.probes import gpu

    why = gpu.unavailable()
    if why is not None:
        return check("gpu", "info", f"no GPU memory samples here: {why}")
    sample = gpu.sample() or {}
    n = len(sample.get("gpus") or [])
    return check("gpu", "ok", f"NVML works: {n} GPU(s) visible")


def _pyspy() -> dict:
    """Whether py-spy may read a worker here: it reads this very process, which (like a worker
    for the relay) is no child of it, so a Yama scope of 1 refuses it as it would a worker."""
    from raysleuth.probes import pyspy

    if pyspy.find_binary() is None:
        return check(
            "py-spy",
            "warn",
            "py-spy is not installed here: workers without an agent show no stack",
            pyspy.MISSING_HINT,
        )
    result = pyspy.dump(os.getpid(), timeout=10.0)
    if result["error"] is None:
        return check("py-spy", "ok", "py-spy reads processes here (ptrace is allowed)")
    return check(
        "py-spy",
        "warn",
        f"{result['error']}; workers without an agent show no stack",
        result["hint"] or pyspy.ptrace_hint(),
    )


FR_VARS = ("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")
"""torch's flight-recorder size, by its current name and by the older NCCL-only one."""

FR_HINT = (
    "Set TORCH_FR_BUFFER_SIZE=2000 in the workers' environment before the process group is "
    'created: ray.init(runtime_env={"env_vars": {"TORCH_FR_BUFFER_SIZE": "2000"}}), or export it '
    "before `ray start` on every node."
)


def _flight_recorder(env=None) -> dict:
    """Whether torch's flight recorder is on in the environment this node's workers get: with it
    the hang radar says which collective each rank is in. `env(key)` reads that environment."""
    from importlib import metadata

    env = env or _raylet_env
    try:
        torch = metadata.version("torch")  # the installed version; torch itself is not imported
    except metadata.PackageNotFoundError:
        return check("flight recorder", "info", "torch is not installed here: no collectives to read")
    for key in FR_VARS:
        value = env(key)
        if value is None or not value.strip():
            continue
        try:
            size = int(value)
        except ValueError:
            return check("flight recorder", "warn", f"{key}={value!r} in workers is no number", FR_HINT)
        if size > 0:
            return check(
                "flight recorder",
                "ok",
                f"{key}={size} in workers (torch {torch}): the radar reads each rank's collectives",
            )
        return check(
            "flight recorder",
            "warn",
            f"{key}=0 in workers (torch {torch}): the flight recorder is off, so the radar cannot say "
            "which collective each rank is in",
            FR_HINT,
        )
    return check(
        "flight recorder",
        "info",
        f"TORCH_FR_BUFFER_SIZE is not set in workers: torch {torch}'s default applies (2.13 keeps "
        "2000 entries, measured with gloo; older versions may keep none)",
        FR_HINT,
    )


TRAIN_HEALTH_ENV = "RAY_TRAIN_WORKER_HEALTH_CHECK_TIMEOUT_S"


def _pause_timeouts(env=None) -> dict:
    """How long a Ray Train worker may stay paused in the debugger before Ray Train's health check
    declares it dead (its controller's poll hangs while every thread is held)."""
    env = env or _raylet_env
    value = env(TRAIN_HEALTH_ENV)
    hint = (
        f'To debug longer, raise it: ray.init(runtime_env={{"env_vars": {{"{TRAIN_HEALTH_ENV}": '
        '"3600"}}); for collectives, init_process_group(timeout=datetime.timedelta(hours=1)).'
    )
    if value is None or not value.strip():
        return check(
            "pause timeouts", "info", f"{TRAIN_HEALTH_ENV} is not set: a paused Ray Train worker is "
            "declared dead after 600 s (Ray's default); other ranks' collectives give up after the "
            "process group's timeout", hint,
        )  # fmt: skip
    return check(
        "pause timeouts", "info", f"{TRAIN_HEALTH_ENV}={value.strip()}: a paused Ray Train worker is "
        "declared dead after that many seconds", hint,
    )  # fmt: skip


def _clock(broker_time: float | None, now: float | None = None) -> dict:
    """`now`: this node's time when the broker's was read, before the slower checks ran."""
    if broker_time is None:
        return check("clock", "info", "not compared (no broker time given)")
    skew = (time.time() if now is None else now) - broker_time
    if abs(skew) <= CLOCK_SKEW_S:
        return check("clock", "ok", f"{skew:+.3f} s from the broker's clock")
    return check(
        "clock",
        "warn",
        f"{skew:+.1f} s from the broker's clock: events of this node sit off on the timeline",
        "Keep the nodes' clocks in sync (chrony or NTP).",
    )


def _logs() -> dict:
    from raysleuth.shared.paths import ray_log_dir as _log_dir

    folder = _log_dir()
    if folder is None:
        return check("logs", "warn", "not in a Ray process: no session log folder to check")
    try:  # a random name, created exclusively: Ray's log folder is 0777, a fixed name could be a link
        fd, probe = tempfile.mkstemp(prefix=".raysleuth-doctor-", dir=folder)
        os.close(fd)
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
    now = time.time()  # the clock is compared first: the checks before it in the list take time
    out = []
    for fn, args in (
        (_python, ()),
        (_ray, ()),
        (_debugpy, ()),
        (_agent, ()),
        (_gpu, ()),
        (_clock, (broker_time, now)),
        (_logs, ()),
        (_pyspy, ()),
        (_flight_recorder, ()),
        (_pause_timeouts, ()),
    ):
        try:
            out.append(fn(*args))
        except Exception as exc:  # noqa: BLE001 - a broken check is a failed check, not a crash
            out.append(check(fn.__name__.strip("_"), "fail", f"the check itself failed: {exc!r}"))
    return out
