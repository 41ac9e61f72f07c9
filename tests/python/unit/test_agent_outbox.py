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
