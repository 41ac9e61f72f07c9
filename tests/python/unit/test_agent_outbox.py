"""What an agent sends besides its report: items queue while no broker is known and go out,
in order and numbered, once one is; events wait for the heartbeat in one batch (a fake registry)."""

from __future__ import annotations

import threading

from raysleuth.agent.outbox import Outbox
from raysleuth.agent.registry import RegistryLink


class Remote:
    def __init__(self, calls, name):
        self.calls, self.name = calls, name

    def remote(self, *args):
        self.calls.append((self.name, *args))


class FakeRegistry:
    def __init__(self):
        self.calls = []
        self.emit = Remote(self.calls, "emit")


def make(worker_id="w1"):
    link = RegistryLink(lambda: None, lambda: "Agent[test]")
    wake = threading.Event()
    return Outbox(link, lambda: worker_id, wake), link, wake


def test_items_queue_without_a_broker_and_go_out_in_order_once_it_is_found():
    box, link, wake = make()
    box.emit("log", {"message": "a"})
    box.emit("log", {"message": "b"})
    assert wake.is_set()  # the agent thread looks for the registry now, not at the next retry
    link.handle = reg = FakeRegistry()
    box.flush_emits()
    assert [(c[2], c[3]["message"], c[3]["n"]) for c in reg.calls] == [("log", "a", 0), ("log", "b", 1)]
    assert all(c[1] == "w1" for c in reg.calls)


def test_with_a_broker_an_emit_is_sent_at_once():
    box, link, _ = make()
    link.handle = reg = FakeRegistry()
    box.emit("snapshot", {"id": "s"})
    assert reg.calls and reg.calls[0][2] == "snapshot" and "pid" in reg.calls[0][3]


def test_events_are_kept_for_crash_records_and_sent_in_one_batch():
    box, link, _ = make()
    for i in range(3):
        box.record_event({"name": f"e{i}"}, disabled=False)
    box.record_event({"name": "own-actor"}, disabled=True)  # kept, not sent
    assert [e["name"] for e in box.recent] == ["e0", "e1", "e2", "own-actor"]
    box.flush_events()  # no broker yet: nothing leaves
    link.handle = reg = FakeRegistry()
    box.flush_events()
    ((_, _, kind, payload),) = reg.calls
    assert kind == "events" and [e["name"] for e in payload["items"]] == ["e0", "e1", "e2"]
    assert payload["dropped"] == 0


def test_watch_rows_wait_for_a_batch_and_reach_the_broker_as_rows(monkeypatch):
    from raysleuth.agent import outbox
    from raysleuth.broker.events import EventHub
    from raysleuth.broker.workers.inbox import Inbox

    box, link, _ = make()
    link.handle = reg = FakeRegistry()
    assert box.flush_rows() is None and not box.nudge.is_set()  # nothing queued
    for n in (1, 2, 3):
        box.emit_row({"id": "wt1", "pass": n, "values": [{"name": "grad", "hash": f"h{n}"}]})
    assert box.nudge.is_set()  # the first row of a batch wakes the agent thread
    due = box.flush_rows()
    assert due is not None and 0 < due <= outbox.ROW_BATCH_S and reg.calls == []
    monkeypatch.setattr(outbox, "ROW_BATCH_S", 0.0)
    assert box.flush_rows() is None
    [(_, wid, kind, payload)] = reg.calls  # three rows, one call
    assert (wid, kind, payload["dropped"]) == ("w1", "rows", 0)

    class Table:
        def get(self, wid):
            return None

    hub, got = EventHub(), []
    hub.on("watch-row", got.append)
    Inbox(Table(), None, None, None, hub).route({"worker": wid, "kind": kind, "data": payload})
    assert [(w, r["pass"], r["values"][0]["hash"], r["worker"]) for w, r in got] == [
        ("wt1", n, f"h{n}", "w1") for n in (1, 2, 3)
    ]
    assert all("rank" in r and r["pid"] for _, r in got)


def test_a_full_row_batch_drops_the_oldest_and_says_how_many(monkeypatch):
    from raysleuth.agent import outbox

    monkeypatch.setattr(outbox, "ROWS_MAX", 4)
    box, link, _ = make()
    link.handle = reg = FakeRegistry()
    for n in range(1, 7):
        box.emit_row({"id": "wt1", "pass": n})
    box.flush_rows(force=True)
    [(_, _, _, payload)] = reg.calls
    assert [r["pass"] for r in payload["items"]] == [3, 4, 5, 6] and payload["dropped"] == 2


def test_the_agent_thread_sends_rows_while_it_waits_for_the_heartbeat_answer():
    """answer_meanwhile: `work` runs when woken, the answer ends the wait (a real future)."""
    from concurrent.futures import Future

    from raysleuth.agent.registry import answer_meanwhile

    fut: Future = Future()
    wake = threading.Event()
    worked: list[int] = []

    class Ref:
        def future(self):
            return fut

    def work():
        worked.append(len(worked))
        if len(worked) == 1:
            threading.Thread(target=wake.set).start()  # a row queued: work runs again
            return None
        if len(worked) == 2:
            threading.Thread(target=fut.set_result, args=(["cmd"],)).start()
        return 5.0

    assert answer_meanwhile(Ref(), 30.0, wake, work) == ["cmd"]
    assert worked == [0, 1]
