"""A worker's stdout and stderr as Ray writes them on its node (`worker-<id>-<job>-<pid>.out|err`
in the session's log folder), read in byte ranges so a client can follow them.

Runs in the node relay (on the worker's node); pure file logic, no Ray import.
"""

from __future__ import annotations

import glob
import os
import re

STREAMS = ("out", "err")

MAX_CHUNK = 256 * 1024
"""Most bytes one read returns (a client asks again from `next_offset`)."""


def find_worker_log(log_dir: str, worker_id: str, pid: int | None, stream: str) -> str | None:
    """The newest file of `stream` for the worker (by id, else by pid), or None."""
    if stream not in STREAMS:
        raise ValueError(f"stream must be one of {', '.join(STREAMS)}, not {stream!r}")
    patterns = [os.path.join(log_dir, f"worker-{glob.escape(worker_id)}-*.{stream}")]
    if pid:
        patterns.append(os.path.join(log_dir, f"worker-*-{int(pid)}.{stream}"))
    for pattern in patterns:
        found = sorted(glob.glob(pattern), key=os.path.getmtime)
        if found:
            return found[-1]
    return None


def read_range(path: str, offset: int, max_bytes: int = MAX_CHUNK) -> dict:
    """{path, offset, next_offset, size, data}: up to `max_bytes` from `offset` (negative: that
    many bytes before the end), cut back to a whole line where it can be."""
    size = os.path.getsize(path)
    start = max(0, size + offset) if offset < 0 else min(offset, size)
    want = max(0, min(max_bytes, MAX_CHUNK))
    with open(path, "rb") as f:
        f.seek(start)
        raw = f.read(want)
    if offset < 0 and start > 0:  # from the middle of a line: start at the next one
        nl = raw.find(b"\n")
        if nl >= 0:
            start, raw = start + nl + 1, raw[nl + 1 :]
    if start + len(raw) < size:  # more to come: end at a whole line where there is one
        nl = raw.rfind(b"\n")
        if nl >= 0:
            raw = raw[: nl + 1]
    return {
        "path": path,
        "offset": start,
        "next_offset": start + len(raw),
        "size": size,
        "data": raw.decode("utf-8", "replace"),
    }


# --- Ray's fatal checks ------------------------------------------------------------------------
# A RAY_CHECK that fails aborts the process after one log line at level C (`[<time> C <pid>
# <tid>] file.cc:12: ... Check failed: cond`) and a stack; Ray writes it to the worker's .err file
# and to its python-core-worker-<id>_<pid>.log.

_FATAL = re.compile(r"^\[\d{4}-\d\d-\d\d [\d:,.]+ C \d+ \d+\]\s*(?P<where>[\w.\-/]+:\d+):?\s*(?P<text>.*)$")
_CHECK = re.compile(r"(Check failed:.*?)\s*$")

FATAL_TAIL_BYTES = 256 * 1024
"""Bytes read from the end of a dead worker's log: the abort is its last words."""

FATAL_STACK_LINES = 24
"""Lines kept after the fatal line (Ray's stack trace)."""


def fatal_line(line: str) -> str | None:
    """`file.h:66: Check failed: cond` (or the fatal message) when `line` is a Ray fatal log line."""
    m = _FATAL.match(line.rstrip("\n"))
    if m is None:
        return None
    check = _CHECK.search(m["text"])
    return f"{m['where']}: {(check.group(1) if check else m['text'].strip())[:300]}"


def fatal_in_text(text: str) -> dict | None:
    """The first fatal check in a log text: {check, text (the line and the stack after it)}."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        check = fatal_line(line)
        if check is None:
            continue
        if "Check failed" not in check:  # older Rays put the condition on a line of its own
            more = next((m for m in map(_CHECK.search, lines[i + 1 : i + 4]) if m), None)
            if more:
                check = f"{check.split(': ', 1)[0]}: {more.group(1)[:300]}"
        return {"check": check, "text": "\n".join(lines[i : i + 1 + FATAL_STACK_LINES])}
    return None


def worker_log_files(log_dir: str, worker_id: str | None = None, pid: int | None = None) -> list[str]:
    """A worker's .err file and core-worker log (all workers' when no id nor pid is given)."""
    if worker_id is None and pid is None:
        patterns = ["worker-*.err", "python-core-worker-*.log"]
    else:
        wid = glob.escape(worker_id or "*") if worker_id else "*"
        tail = str(int(pid)) if pid else "*"
        patterns = [f"worker-{wid}-*-{tail}.err", f"python-core-worker-{wid}_{tail}.log"]
    out: list[str] = []
    for pattern in patterns:
        out += sorted(glob.glob(os.path.join(log_dir, pattern)))
    return out


def _tail(path: str, max_bytes: int) -> str:
    with open(path, "rb") as f:
        f.seek(max(0, os.path.getsize(path) - max_bytes))
        return f.read().decode("utf-8", "replace")


def worker_fatal_check(log_dir: str, worker_id: str | None, pid: int | None) -> dict | None:
    """The fatal Ray check a worker died of, from the end of its logs: {check, file, text}."""
    for path in worker_log_files(log_dir, worker_id, pid):
        try:
            found = fatal_in_text(_tail(path, FATAL_TAIL_BYTES))
        except OSError:
            continue
        if found:
            return {**found, "file": path}
    return None


def fatal_checks(log_dir: str) -> list[dict]:
    """Every fatal Ray check in a session's worker logs: [{file, line, check}] (line from 1)."""
    found = []
    for path in worker_log_files(log_dir):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                for n, line in enumerate(f, 1):
                    check = fatal_line(line)
                    if check is not None:
                        found.append({"file": path, "line": n, "check": check})
        except OSError:
            continue
    return found
