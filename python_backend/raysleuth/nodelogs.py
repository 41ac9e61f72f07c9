"""A worker's stdout and stderr as Ray writes them on its node (`worker-<id>-<job>-<pid>.out|err`
in the session's log folder), read in byte ranges so a client can follow them.

Runs in the node relay (on the worker's node); pure file logic, no Ray import.
"""

from __future__ import annotations

import glob
import os

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
