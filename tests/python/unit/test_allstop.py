"""All-stop per job on fakes: one rank's stop pauses the job's other ranks, once per stop."""

from __future__ import annotations

import pytest
from broker_fakes import FakeTable, worker

from raysleuth.broker.debug.allstop import AllStop
from raysleuth.broker.events import EventHub
from raysleuth.broker.tasks import OwnedTasks
from raysleuth.shared.errors import BadRequest


class Control:
    def __init__(self):
        self.pauses: list[list[str]] = []

    async def pause(self, body):
        self.pauses.append(sorted(body["workers"]))
        return {"paused": body["workers"], "pending": [], "skipped": []}


def setup():
    ws = [
        worker("w0", rank=0, job_id="J"),
        worker("w1", rank=1, job_id="J"),
        worker("w2", rank=2, job_id="J", state="idle"),
        worker("w3", rank=0, job_id="K"),
        worker("w4", rank=3, job_id="J", agent=False),
    ]
    hub, tasks, control = EventHub(), OwnedTasks("test"), Control()
    return AllStop(FakeTable(ws), control, hub, tasks), ws, hub, tasks, control


def states(ws, **kw):
    for w in ws:
        w.state = kw.get(w.id, "running")


async def test_one_stop_pauses_the_other_agent_ranks_of_its_job_only_when_on():
    allstop, ws, hub, tasks, control = setup()
    ws[0].state = "paused"
    hub.emit("table")
    await tasks.wait()
    assert control.pauses == []  # off by default

    allstop, ws, hub, tasks, control = setup()
    assert allstop.put_settings({"all_stop": True}) == {"all_stop": True}
    ws[0].state = "paused"
    hub.emit("table")
    states(ws, w0="paused", w1="paused", w2="paused")  # the ones it paused stop: no second round
    hub.emit("table")
    await tasks.wait()
    assert control.pauses == [["w1", "w2"]] and allstop.last["paused"] == ["w1", "w2"]


async def test_after_the_job_runs_again_the_next_stop_pauses_the_others_again():
    allstop, ws, hub, tasks, control = setup()
    allstop.put_settings({"all_stop": True})
    states(ws, w0="paused")
    hub.emit("table")
    states(ws, w0="paused", w1="paused", w2="paused")
    hub.emit("table")
    states(ws)  # continue all
    hub.emit("table")
    states(ws, w2="paused")
    hub.emit("table")
    await tasks.wait()
    assert control.pauses == [["w1", "w2"], ["w0", "w1"]]


def test_the_setting_takes_a_boolean_only():
    allstop, *_ = setup()
    with pytest.raises(BadRequest, match="'all_stop' must be true or false") as err:
        allstop.put_settings({"all_stop": "yes"})
    assert err.value.hint and allstop.settings() == {"all_stop": False}
