"""The stack of a Python process that cannot answer for itself (no agent, or wedged in C code
holding the GIL), read from outside with `py-spy dump` (issue 12).

Runs in the node relay, on the node of the process. Shaped like the agent's own stacks: threads
of frames, innermost first, each with its source line where the file is readable here. Never
raises: a dump that cannot be had says why in `error`, and what to do in `hint`.
"""

from __future__ import annotations

import json
import linecache
import os
import shutil
import subprocess
import sys

PTRACE_HINT = (
    "py-spy reads another process with ptrace, and this node refuses it. In a container, add the "
    "capability CAP_SYS_PTRACE (`docker run --cap-add SYS_PTRACE`; Kubernetes: "
    'securityContext.capabilities.add: ["SYS_PTRACE"]). On the host, kernel.yama.ptrace_scope'
    "{scope} must be 0, or 1 or 2 with that capability: `sudo sysctl -w kernel.yama.ptrace_scope=0`."
)
"""What to do when ptrace is refused; `{scope}` is this node's current setting, where known."""

MISSING_HINT = (
    "Install py-spy into the Python that runs Ray on this node (`pip install py-spy`; "
    "`pip install 'ray[default]'` brings it)."
)


def find_binary() -> str | None:
    """The py-spy next to this Python (the venv's bin folder), else the first on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), "py-spy")
    if os.path.isfile(here) and os.access(here, os.X_OK):
        return here
    return shutil.which("py-spy")


def ptrace_scope() -> int | None:
    """kernel.yama.ptrace_scope on this node; None where Yama is not there."""
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def ptrace_hint() -> str:
    scope = ptrace_scope()
    return PTRACE_HINT.format(scope=f" (now {scope})" if scope is not None else " (not set on this node)")


def _failure(error: str, hint: str | None = None) -> dict:
    return {"threads": [], "error": error, "hint": hint}


def dump(pid: int, native: bool = False, timeout: float = 5.0) -> dict:
    """`py-spy dump` of `pid`: {"threads": [...], "error": str|None, "hint": str|None}."""
    binary = find_binary()
    if binary is None:
        where = f"looked next to {sys.executable} and on PATH"
        return _failure(f"py-spy is not installed on this node ({where})", MISSING_HINT)
    cmd = [binary, "dump", "--json", "--pid", str(int(pid))] + (["--native"] if native else [])
    try:
        proc = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=dict(os.environ, RUST_BACKTRACE="0"),
        )
    except subprocess.TimeoutExpired:
        return _failure(
            f"py-spy did not answer within {timeout:g} s for pid {pid}",
            "The process may be stopped or the node overloaded; try again with a longer timeout.",
        )
    except OSError as exc:
        return _failure(f"cannot run {binary}: {exc}", MISSING_HINT)
    if proc.returncode != 0:
        return _explain(pid, proc.stderr + proc.stdout)
    try:
        raw = json.loads(proc.stdout)
    except ValueError:
        return _failure(f"py-spy printed no JSON for pid {pid}: {proc.stdout[:200]!r}")
    return {"threads": [_thread(t, pid) for t in raw], "error": None, "hint": None}


def _explain(pid: int, output: str) -> dict:
    """py-spy's failure as an error of ours: its first line, and a hint where we know one."""
    first = next((line.strip() for line in output.splitlines() if line.strip()), "no output")
    low = output.lower()
    if "permission denied" in low or "operation not permitted" in low:
        return _failure(
            f"py-spy may not read pid {pid}: ptrace is refused (permission denied)", ptrace_hint()
        )
    if "check that the process is running" in low or "no such process" in low:
        return _failure(f"process {pid} is gone ({first})")
    if "python version" in low:
        return _failure(f"pid {pid} does not look like a Python process to py-spy ({first})")
    return _failure(f"py-spy failed on pid {pid}: {first}")


def _thread(raw: dict, pid: int) -> dict:
    name = raw.get("thread_name") or ""
    return {
        "name": name or f"thread {raw.get('os_thread_id')}",
        "id": raw.get("thread_id"),
        "main": raw.get("os_thread_id") == pid or name == "MainThread",
        "frames": [_frame(f) for f in raw.get("frames") or []],
    }


def _frame(raw: dict) -> dict:
    path = raw.get("filename") or raw.get("short_filename") or "?"
    line = int(raw.get("line") or 0)
    name = str(raw.get("name") or "?")
    if raw.get("module") is None and "." in name and not name.startswith("<"):
        # A Python frame: py-spy writes the qualified name (Thread.run); the agent's stacks use
        # the code object's own name (run), and both must group alike.
        name = name.rpartition(".")[2]
    code = None
    if raw.get("module") is None and line > 0 and os.path.isfile(path):
        linecache.checkcache(path)  # the relay lives long: files change under it
        code = linecache.getline(path, line).strip() or None
    return {"path": path, "line": line, "function": name, "code": code}
