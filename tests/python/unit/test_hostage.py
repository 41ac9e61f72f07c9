"""No expression takes a worker hostage (#23): an evaluate over its budget is answered "still
running" and leaves the agent free (it runs on in the background); a condition over its budget
disarms its point in the worker with a note. Real threads, real evaluation; budgets shrunk."""

from __future__ import annotations

import sys
import threading
import time

from raysleuth.agent import commands
from raysleuth.agent.commands import bounded_eval


def frame_with(**names):
    def f():
        return sys._getframe()

    fr = f()
    fr.f_globals.update(names)
    return fr


def test_a_quick_evaluate_answers_its_value_or_its_error():
    fr = frame_with(x=21)
    assert bounded_eval("x * 2", fr, 5) == (True, 42, None)
    done, value, exc = bounded_eval("1 / 0", fr, 5)
    assert done and isinstance(exc, ZeroDivisionError)


def test_an_evaluate_over_its_budget_is_answered_and_left_running_and_the_next_one_works():
    release = threading.Event()
    fr = frame_with(wait=release.wait, x=2)
    done, _, said = bounded_eval("wait()", fr, 0.3)  # blocked, like sum(range(10**12)) in C
    assert not done and said.startswith("still running after 0.3 s") and "still takes a continue" in said
    assert bounded_eval("x + 2", fr, 5) == (True, 4, None)  # the stuck one is no obstacle
    release.set()


class Agent:
    def __init__(self):
        self.sent = []
        self.rearmed = 0

    def emit(self, kind, payload):
        self.sent.append((kind, payload))

    def rearm_soon(self):
        self.rearmed += 1


def test_a_slow_condition_disarms_its_point_with_a_note(monkeypatch):
    from raysleuth.agent import hits
    from raysleuth.agent.points import ArmedPoint
    from raysleuth.model.point import Point

    monkeypatch.setattr(hits, "EXPRESSION_BUDGET_S", 0.2)
    spec = Point.parse_breakpoint("/job.py", {"line": 3, "condition": "slow() or True"}).to_spec()
    p = ArmedPoint(Point.from_spec(spec))
    agent = Agent()
    runner = hits.Hits(agent)
    fr = frame_with(slow=lambda: time.sleep(0.3))
    runner._fire(p, fr)
    assert p.dead and agent.rearmed == 1
    ((kind, payload),) = agent.sent
    assert (
        kind == "log" and payload["error"] and payload["message"].startswith("disarmed: the condition ran 0.")
    )
    assert "budget 0.2 s" in payload["message"]


def test_the_broker_waits_longer_than_the_agents_budget():
    from raysleuth.broker.workers.control import EVALUATE_TIMEOUT_S

    assert EVALUATE_TIMEOUT_S > commands.EVALUATE_BUDGET_S + 1
