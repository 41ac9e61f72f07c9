"""The agent's debugger room without debugpy: the paused state the worker table reads, and a
thread waiting for a client that the watchdog, "Continue all" or the hold's timeout lets go
(a fake pydevd at the seam; the real hand-off is covered by the integration tests)."""

from __future__ import annotations

import sys
import threading
import time
import types

import pytest

from raysleuth.agent import debugger, stops


@pytest.fixture
def fake_pydevd(monkeypatch):
    """A pydevd whose client never comes (or comes when `attached` is set)."""
    mod = types.ModuleType("pydevd")
    mod.attached = False
    mod._is_attached = lambda: mod.attached
    mod._wait_for_attach = lambda cancel: cancel.wait(10)
    monkeypatch.setitem(sys.modules, "pydevd", mod)
    return mod


def test_paused_state_is_the_calling_threads_and_cleared_again():
    where = {"path": "/job.py", "line": 12, "reason": "breakpoint"}
    stops.set_paused(where)
    try:
        assert stops.paused_at() == where and stops.paused_at() is not where
        assert stops.paused_thread() == threading.get_ident()
    finally:
        stops.set_paused(None)
    assert stops.paused_at() is None and stops.paused_thread() is None


def test_resume_waiting_lets_a_thread_waiting_for_a_client_go_on(fake_pydevd):
    result = {}
    th = threading.Thread(target=lambda: result.setdefault("attached", debugger.wait_for_client()))
    th.start()
    deadline = time.monotonic() + 5
    while stops.resume_waiting() == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    th.join(5)
    assert result == {"attached": False}
    assert stops.resume_waiting() == 0  # nobody waits any more


def test_wait_for_client_gives_up_after_its_timeout(fake_pydevd):
    t0 = time.monotonic()
    assert debugger.wait_for_client(timeout=0.2) is False
    assert 0.15 < time.monotonic() - t0 < 5


def test_wait_for_client_returns_at_once_when_a_client_is_there(fake_pydevd):
    fake_pydevd.attached = True
    assert debugger.wait_for_client(timeout=0.01) is True


def test_debugpy_will_stop_is_false_without_pydevd(monkeypatch):
    monkeypatch.delitem(sys.modules, "pydevd", raising=False)
    assert debugger.debugpy_will_stop(sys._getframe(), 1) is False


def test_stop_here_logs_and_returns_when_the_listener_cannot_open(monkeypatch):
    class Agent:
        def __init__(self):
            self.pokes = 0
            self.log = self
            self.errors = []

        def exception(self, msg, *args):
            self.errors.append(msg)

        def poke(self):
            self.pokes += 1

    def broken():
        raise OSError("no port")

    monkeypatch.delitem(sys.modules, "pydevd", raising=False)
    monkeypatch.setattr(debugger, "open_listener", broken)
    agent = Agent()
    debugger.stop_here(agent, sys._getframe(), "bp-1")  # must not raise into the task
    assert agent.errors == ["opening the debugger for a breakpoint failed"]
    assert agent.pokes == 0 and stops.paused_at() is None
