"""A crash record built outside a Ray task (agent/rerun.py's capture): it says there is nothing to
rerun, and never starts a Ray instance to ask (`ray.get_runtime_context()` would: 3.5-7 s and a
local cluster left running, found by bench/crash_capture.py's first capture)."""

from __future__ import annotations

import sys

import ray

from raysleuth.agent import postmortem


class _Agent:
    disabled = False
    events: list = []

    def identity(self) -> dict:
        return {"id": "unit", "rank": 0, "pid": 1}


def _fails(x: int) -> None:
    raise ValueError(f"bad {x}")


def test_a_record_outside_a_ray_task_keeps_no_rerun_and_starts_no_ray():
    assert not ray.is_initialized()
    try:
        _fails(3)
    except ValueError:
        info = sys.exc_info()
    try:
        record = postmortem.build_record(_Agent(), info)
        assert not ray.is_initialized()
    finally:
        if ray.is_initialized():
            ray.shutdown()
    assert record["rerun"] == {"unavailable": "not raised in a Ray task: nothing to submit again"}
    assert "rerun_blob" not in record
    assert record["exc_type"] == "ValueError" and record["frames"]
