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
    done, _, said = bounded_eval("wait()", fr, 0.3)  # blocked in C, the GIL released
    assert not done and said == "runs on"
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


def test_the_agent_answers_before_the_broker_stops_waiting():
    from raysleuth.broker.workers.hostage import agent_budget

    for budget in (2.0, 3.0, 10.0, 60.0):  # its answer has half a second or more to arrive
        assert agent_budget(budget) + commands.INTERRUPT_GRACE_S <= budget - 0.5


def test_a_python_level_evaluate_is_interrupted_at_its_budget_and_its_thread_ends():
    """#37: past its budget an evaluate of Python code is stopped (its own thread's trace function
    raises at its next line), so nothing of it runs on: an endless generator, CPU-bound and
    sleeping; and one that catches the interrupt is interrupted again."""
    fr = frame_with(time=time)
    stubborn = "any(f() for _ in iter(int, 1))"

    def f():
        try:
            time.sleep(0.01)
        except BaseException:  # noqa: BLE001 - what a careless expression does
            return False
        return False

    fr.f_globals["f"] = f
    for expr in ("any(x for x in iter(int, 1))", "any(time.sleep(0.05) for _ in iter(int, 1))", stubborn):
        before = {t.ident for t in threading.enumerate()}
        t0 = time.monotonic()
        assert bounded_eval(expr, fr, 0.3) == (False, None, "interrupted")
        assert time.monotonic() - t0 < 0.3 + commands.INTERRUPT_GRACE_S + 0.2
        assert {t.ident for t in threading.enumerate()} <= before  # its thread is gone


def test_an_interrupt_never_reaches_code_after_the_evaluate():
    """An evaluate that ends just as its budget runs out: the interrupt, if any, goes off inside
    its own thread's wrapper, never in the caller's thread or threading's code."""
    import sys as _sys

    hooks = []
    old = threading.excepthook
    threading.excepthook = hooks.append
    try:
        fr = frame_with(time=time)
        for budget in (0.01, 0.02, 0.03, 0.05):
            done, _, _ = bounded_eval("time.sleep(0.03) or sum(i for i in range(20000))", fr, budget)
            for t in threading.enumerate():  # each evaluate's thread ends before the next one
                if t.name == "raysleuth-evaluate":
                    t.join(10)
                    assert not t.is_alive(), "an evaluate thread still runs after 10 s"
        assert hooks == []
    finally:
        threading.excepthook = old
    assert _sys.exc_info() == (None, None, None)


class Hub:
    def __init__(self):
        self.emitted = []

    def emit(self, name, data):
        self.emitted.append((name, data))


async def test_the_broker_answers_for_a_worker_whose_agent_cannot_and_shows_it_busy():
    """#37 item 9 on fakes: rank 0's agent never answers (C code holds its GIL). The broker
    answers "still running" at its budget, marks rank 0 busy, answers its next evaluate and skips
    its continue at once, while rank 1 evaluates and continues; ending rank 0 clears busy."""
    import asyncio

    from broker_fakes import FakeAgents, FakeTable, Remote, worker

    from raysleuth.broker.workers.control import Control

    stuck = asyncio.get_running_loop().create_future()  # rank 0's answer never comes

    async def answer(wid, cmd):
        return await stuck if wid == "w0" else {"ok": True, "value": "2", "type": "int"}

    async def never(wid, cmd):
        return await stuck

    ws = [worker("w0", rank=0, state="paused"), worker("w1", rank=1, state="paused")]
    agents = FakeAgents({"evaluate": answer, "ping": never, "resume": {"ok": True, "resumed": True}})
    ended = []

    class Relay:
        end_worker = Remote(lambda pid: ended.append(pid) or {"ok": True})

    class Relays:
        async def relay_for(self, node_id):
            return Relay()

    class Leases:
        def get(self, wid):
            return None

    hub = Hub()
    control = Control(FakeTable(ws), agents, Leases(), hub=hub, relays=Relays())
    control.hostages.budget = 0.5
    t0 = asyncio.get_running_loop().time()
    r0, r1 = await control.evaluate({"expression": "sum(range(10**12))", "force": True})
    assert asyncio.get_running_loop().time() - t0 < 0.5 + 0.3
    assert r0["error"].startswith("still running after 0.5 s: its agent does not answer"), r0
    assert r0["busy"]["what"] == "evaluate" and r0["busy"]["expression"] == "sum(range(10**12))"
    assert r1["value"] == "2"
    assert hub.emitted == [("busy", {"worker": "w0", "busy": r0["busy"]})]
    # The next evaluate and the continue do not wait for rank 0.
    t0 = asyncio.get_running_loop().time()
    r0b, r1b = await control.evaluate({"expression": "1 + 1"})
    assert r0b["error"].startswith("busy: an evaluate since ") and r1b["value"] == "2"
    res = await control.continue_paused({})
    assert asyncio.get_running_loop().time() - t0 < 0.3
    assert res["continued"] == ["w1"] and res["skipped"][0]["worker"] == "w0"
    assert "raysleuth kill w0" in res["skipped"][0]["reason"]
    done = await control.end_worker("w0")
    assert done == {"ok": True, "worker": "w0", "pid": ws[0].pid} and ended == [ws[0].pid]
    assert control.hostages.busy == {} and hub.emitted[-1] == ("busy", {"worker": "w0", "busy": None})


async def test_a_late_answer_frees_a_busy_worker():
    import asyncio

    from broker_fakes import FakeAgents, FakeTable, worker

    from raysleuth.broker.workers.control import Control

    late = asyncio.get_running_loop().create_future()

    async def answer(wid, cmd):
        return await late

    agents = FakeAgents({"evaluate": answer})

    class Leases:
        def get(self, wid):
            return None

    control = Control(FakeTable([worker("w0", rank=0, state="paused")]), agents, Leases(), hub=Hub())
    control.hostages.budget = 0.2
    [row] = await control.evaluate({"expression": "slow()"})
    assert row["busy"] and "w0" in control.hostages.busy
    late.set_result({"ok": True, "value": "3", "type": "int"})  # the C call ended
    for _ in range(50):
        if not control.hostages.busy:
            break
        await asyncio.sleep(0.01)
    assert control.hostages.busy == {}


def test_with_debugpy_listening_an_evaluate_left_in_c_stalls_no_other_thread():
    """The interrupt stays inside the evaluate's own thread: with debugpy listening (as in a worker
    the editor attached to), an evaluate left sleeping in C must not hold up another thread's
    sleep or the next evaluate (an exception raised into it from outside did, for seconds)."""
    import subprocess
    import textwrap

    script = textwrap.dedent(
        """
        import sys, time, debugpy
        debugpy.listen(("127.0.0.1", 0))
        from raysleuth.agent.commands import bounded_eval
        fr = sys._getframe()
        print(bounded_eval("time.sleep(4)", fr, 0.3)[2])
        t = time.monotonic(); time.sleep(0.1); print(round(time.monotonic() - t, 2))
        t = time.monotonic(); print(bounded_eval("2 + 2", fr, 2)[:2], round(time.monotonic() - t, 2))
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    fate, slept, last = out.stdout.splitlines()[:3]
    answer, took = last.rsplit(" ", 1)
    assert fate == "runs on", out
    assert float(slept) < 0.5 and answer == "(True, 4)" and float(took) < 0.5, out
