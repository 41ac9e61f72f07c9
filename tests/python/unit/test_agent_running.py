"""Points armed while their function is running already (a loop inside one long function): they
fire at the next pass, on both backends, and the worker pays nothing for it once that frame has
returned (no Ray; the stop into debugpy is covered by the integration tests)."""

from __future__ import annotations

import sys
import threading

import pytest
from helpers import wait_until
from test_trigger import Recorder

from raysleuth.agent import trigger as trig

FILE = __file__
REWRITE = sys.version_info < (3, 12)


class Loop:
    """A thread running one of the loops below until told to stop; what it saw, per pass."""

    def __init__(self, fn) -> None:
        self.stop = False
        self.n = 0
        self.trace_seen: list = []
        """sys.gettrace() of the loop's thread, per pass."""
        self.trace_after = "unset"
        """sys.gettrace() of the loop's thread once the loop's function returned."""
        self.raised: Exception | None = None
        self.thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self.thread.start()
        wait_until(lambda: self.n > 3, 10, 0.01, "the loop running")

    def _run(self, fn) -> None:
        try:
            fn(self)
        except KeyError as exc:
            self.raised = exc
        self.trace_after = sys.gettrace()

    def finish(self) -> None:
        self.stop = True
        self.thread.join(10)
        assert not self.thread.is_alive()


def spin(state):
    while not state.stop:
        state.n += 1
        state.trace_seen.append(sys.gettrace())  # spin-line
        del state.trace_seen[:-2]


def spin_closures(state):
    while not state.stop:

        def step(x):
            return x + 1  # closure-line

        state.n = step(state.n)
        state.trace_seen.append(sys.gettrace())
        del state.trace_seen[:-2]


def spin_then_raise(state):
    while not state.stop:
        state.n += 1  # raise-line
    raise KeyError("the loop's own error")


def idle(state):
    while not state.stop:
        state.n += 1
        state.trace_seen.append(sys.gettrace())
        del state.trace_seen[:-2]


def line_of(fn, tag: str) -> int:
    import inspect

    lines, start = inspect.getsourcelines(fn)
    return next(start + i for i, text in enumerate(lines) if text.rstrip().endswith(f"# {tag}"))


SPIN = line_of(spin, "spin-line")
CLOSURE = line_of(spin_closures, "closure-line")
RAISE = line_of(spin_then_raise, "raise-line")


def spec(pid, line, **kw):
    if "condition" in kw:
        kw["rest"] = kw["condition"]
    return dict({"id": pid, "path": FILE, "line": line}, **kw)


@pytest.fixture
def t():
    rec = Recorder()
    tr = trig.Trigger(rec)
    loops: list[Loop] = []
    yield tr, rec, loops
    for loop in loops:
        loop.stop = True
    tr.disarm_all()
    for loop in loops:
        loop.thread.join(10)


def test_a_point_in_a_loop_running_now_fires_at_its_next_pass(t):
    tr, rec, loops = t
    loop = Loop(spin)
    other = Loop(idle)
    loops += [loop, other]
    tr.update(
        [spec("l", SPIN, condition="state.n % 2 == 0", hitCondition=">1", logMessage="n={state.n}")], {}
    )
    assert tr.armed == {"l"}
    wait_until(lambda: len(rec.logs()) >= 3, 10, 0.01, "the running loop firing")
    # The same hook logic as rewritten code: the condition and the hit count held.
    counts = [int(m[2:]) for m in rec.logs() if m.startswith("n=")]
    assert all(n % 2 == 0 for n in counts) and counts == sorted(counts)
    assert other.trace_seen[-1] is None  # another thread running too is never traced
    assert sys.gettrace() is None
    loop.finish()
    assert loop.trace_after is None  # its thread runs at full speed again once the frame returned
    if REWRITE:
        assert tr.running.threads == set()


def test_a_closure_made_by_a_running_frame_fires(t):
    tr, rec, loops = t
    loop = Loop(spin_closures)
    loops.append(loop)
    tr.update([spec("c", CLOSURE, logMessage="x={x}")], {})
    wait_until(lambda: len(rec.logs()) >= 2, 10, 0.01, "the closure of the running frame firing")
    xs = [int(m[2:]) for m in rec.logs() if m.startswith("x=")]
    assert xs == sorted(xs) and xs[1] > xs[0]
    loop.finish()
    assert loop.trace_after is None


def test_a_snapshot_in_a_running_frame_captures_its_locals(t):
    tr, rec, loops = t
    loop = Loop(spin)
    loops.append(loop)
    tr.update([spec("s", SPIN, kind="snapshot", snapshot="snap-r", count=1)], {})
    wait_until(lambda: any(k == "snapshot" for k, _ in rec.emitted), 10, 0.01, "a snapshot")
    snap = next(p for k, p in rec.emitted if k == "snapshot")
    top = snap["frames"][0]
    assert (top["function"], top["line"]) == ("spin", SPIN) and "state" in top["locals"]


@pytest.mark.skipif(not REWRITE, reason="the tracer of running frames is the 3.11 backend's")
@pytest.mark.parametrize("fn, line", [(spin_closures, CLOSURE), (spin, SPIN)], ids=["calls", "no-calls"])
def test_disarming_gives_a_running_thread_its_speed_back(t, fn, line):
    tr, rec, loops = t
    loop = Loop(fn)  # with or without a Python call per pass (where a thread could drop its tracer)
    loops.append(loop)
    tr.update([spec("c", line, logMessage="x")], {})
    wait_until(lambda: rec.logs(), 10, 0.01, "armed and firing")
    assert loop.trace_seen[-1] is not None  # the traced thread, while its frame is armed
    tr.update([], {})
    wait_until(lambda: loop.trace_seen[-1] is None, 10, 0.01, "the thread untraced")
    assert tr.running.threads == set()
    fired = len(rec.logs())
    n = loop.n
    wait_until(lambda: loop.n > n + 10, 10, 0.01, "the loop going on")
    assert len(rec.logs()) == fired


@pytest.mark.skipif(not REWRITE, reason="the tracer of running frames is the 3.11 backend's")
def test_a_point_outside_running_frames_traces_no_thread(t):
    tr, rec, loops = t
    loop = Loop(idle)
    loops.append(loop)
    tr.update([spec("l", SPIN, logMessage="x")], {})  # spin() is not running anywhere
    assert tr.armed == {"l"}
    assert tr.running.threads == set() and loop.trace_seen[-1] is None
    n = loop.n
    wait_until(lambda: loop.n > n + 10, 10, 0.01, "the loop going on")
    assert loop.trace_seen[-1] is None


def test_a_running_frame_that_raises_drops_its_tracer_and_keeps_its_error(t):
    tr, rec, loops = t
    loop = Loop(spin_then_raise)
    loops.append(loop)
    tr.update([spec("r", RAISE, logMessage="n={state.n}")], {})
    wait_until(lambda: rec.logs(), 10, 0.01, "the running loop firing")
    loop.finish()
    assert isinstance(loop.raised, KeyError)  # the task's own error, untouched
    assert loop.trace_after is None
    if REWRITE:
        assert tr.running.threads == set()


@pytest.mark.skipif(not REWRITE, reason="the rewrite backend runs on Python 3.11 and older")
def test_a_rewritten_copy_stays_known_after_an_equal_copy_dies():
    """A re-arm makes a new instrumented copy equal by value to the one before; when the old one
    dies, the new one must still be known to call the hook itself, or a running frame of it gets
    the tracer too and every armed line fires twice (seen once in a Ray Tune trial)."""
    from raysleuth.agent.backends.rewrite import RewriteBackend

    ns: dict = {}
    exec(compile("def f(x):\n    y = x + 1\n    return y\n", "twin.py", "exec"), ns)
    f = ns["f"]
    backend = RewriteBackend(lambda line: None)
    lines = frozenset({2})
    assert backend.arm(f, lines)
    first = f.__code__
    backend.rearm_begin()
    assert backend.arm(f, lines)
    backend.rearm_end()
    second = f.__code__
    assert second == first and second is not first, "two copies, equal by value"
    assert backend.hooked_lines(second) == lines
    del first  # the last reference: the copy from before the re-arm dies here
    assert backend.hooked_lines(second) == lines
    backend.disarm_all()
    assert backend.hooked_lines(f.__code__) == frozenset()
