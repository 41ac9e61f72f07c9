"""Evaluate on a worker stopped at a breakpoint runs in the frame it stopped at, even while the
stop's wait runs other code (Ray's call that counts the thread paused, a GCS request that takes
long under load): an evaluate then answered NameError from that call's frame. Real threads."""

from __future__ import annotations

import sys
import threading

from raysleuth.agent import commands, stops


def test_evaluate_runs_in_the_stopped_frame_not_in_what_the_wait_calls():
    inside, release = threading.Event(), threading.Event()

    def count_paused_slowly() -> None:  # stands in for Ray's update_worker_num_paused_threads
        inside.set()
        release.wait(30)

    def task() -> None:
        step = 7
        stops.set_paused({"path": __file__, "line": 1, "reason": "breakpoint"}, sys._getframe())
        try:
            count_paused_slowly()
        finally:
            stops.set_paused(None)
        assert step == 7

    t = threading.Thread(target=task)
    t.start()
    try:
        assert inside.wait(30)
        res = commands.evaluate("step * 6")
        assert res.get("value") == "42", res
        assert res["path"] == __file__ and res["line"] == task.__code__.co_firstlineno + 4  # in task
    finally:
        release.set()
        t.join(30)
    assert stops.paused_frame() is None and stops.paused_thread() is None
