"""Crash capture cost: a 30-frame stack with large locals (arrays, dicts, long strings), captured
the way the agent does at the raise site (bounded reprs on the repr thread, sources, traceback).

Printed as milliseconds and as a ratio against the same run's baseline: Python's own
`traceback.format_exception` of the same exception (what Ray does anyway to build a RayTaskError).
Target: capture ≤ 100 ms.
"""

from __future__ import annotations

import statistics
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import report  # noqa: E402

from raysleuth.agent import postmortem  # noqa: E402

DEPTH = 30
ROUNDS = 15


class _FakeAgent:
    """The agent's surface build_record uses (identity, events): no Ray needed for the cost."""

    disabled = False

    def __init__(self) -> None:
        self.events = [
            {"t": time.time(), "name": "step", "fields": {"i": i, "loss": 0.1 * i}} for i in range(50)
        ]

    def identity(self) -> dict:
        return {"id": "bench", "rank": 0, "pid": 1}


def _recurse(n: int):
    matrix = [[float(i * j) for j in range(200)] for i in range(50)]  # 10 000 floats
    table = {f"key-{i}": list(range(i % 40)) for i in range(500)}
    text = "x" * 100_000
    blob = bytes(200_000)
    if n == 0:
        raise RuntimeError(
            f"depth reached with {len(matrix)} rows, {len(table)} keys, {len(text) + len(blob)} bytes"
        )
    return _recurse(n - 1)


def _exc_info():
    try:
        _recurse(DEPTH - 2)  # + this frame and the bench's caller: 30 frames
    except RuntimeError:
        return sys.exc_info()
    raise AssertionError("no exception")


def main() -> None:
    agent = _FakeAgent()
    capture, base, frames = [], [], 0
    t0 = time.perf_counter()
    postmortem.build_record(
        agent, _exc_info()
    )  # the first in a process also imports and starts the repr thread
    first = (time.perf_counter() - t0) * 1000
    for _ in range(ROUNDS):
        info = _exc_info()
        t0 = time.perf_counter()
        "".join(traceback.format_exception(*info))
        base.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        rec = postmortem.build_record(agent, info)
        capture.append((time.perf_counter() - t0) * 1000)
        frames = len(rec["frames"])
    cap, bas = statistics.median(capture), statistics.median(base)
    report(
        "crash_capture",
        {
            "frames": frames,
            "first_capture_ms": first,
            "capture_ms_p50": cap,
            "capture_ms_max": max(capture),
            "format_exception_ms_p50": bas,
            "ratio_vs_format_exception": cap / bas if bas else 0.0,
        },
        {"capture_ms_p50": 100.0, "capture_ms_max": 100.0},
    )


if __name__ == "__main__":
    main()
