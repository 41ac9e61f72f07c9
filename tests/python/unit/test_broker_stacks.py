"""The hang radar's service on fakes (issue 12): who is read how, under one deadline, grouped;
a worker nobody can read says why; the watch mode raises one hang per stuck job."""

from __future__ import annotations

import asyncio
import time

import pytest
from broker_fakes import FakeAgents, FakeRelay, FakeRelays, FakeTable, worker

from raysleuth.broker.radar.hangwatch import HANG_EVENT, HangDetector, HangWatch
from raysleuth.broker.radar.stacks import StacksQuery, StacksService
from raysleuth.broker.telemetry.timeline import Timeline
from raysleuth.shared.errors import BadRequest


class Hub:
    def __init__(self):
        self.published: list[tuple[str, dict]] = []
        self.emitted: list[tuple[str, dict]] = []

    def publish(self, event, data):
        self.published.append((event, data))

    def emit(self, topic, payload=None):
        self.emitted.append((topic, payload))


def frames(*where):
    return [{"path": p, "line": line, "function": fn, "code": None} for p, fn, line in where]


ALL_REDUCE = frames(
    ("/torch/distributed/distributed_c10d.py", "all_reduce", 2800), ("/job/train.py", "step", 88)
)
LOOP = frames(("/job/train.py", "slow_loader", 42), ("/job/train.py", "step", 80))


def answer(stack):
    return {
        "ok": True,
        "threads": [{"name": "MainThread", "id": 1, "main": True, "frames": stack}],
        "walk_ms": 0.3,
    }


def ranked(n=4, **kw):
    return [worker(f"w{r}", rank=r, task="Trainer.step", **kw) for r in range(n)]


def service(workers, agent_answers=None, pyspy=None, relays=None, timeline=None):
    agents = FakeAgents({"stacks": agent_answers} if agent_answers is not None else {})
    relays = relays or FakeRelays(FakeRelay(pyspy=pyspy))
    hub = Hub()
    svc = StacksService(FakeTable(workers), agents, relays, timeline or Timeline(hub), hub)
    return svc, agents, relays, hub


async def test_three_ranks_in_all_reduce_and_rank_3_elsewhere_are_two_groups_rank_3_behind():
    svc, agents, _, _ = service(ranked(), lambda wid, c: answer(LOOP if wid == "w3" else ALL_REDUCE))
    res = await svc.take(StacksQuery())
    assert sorted(wid for wid, c in agents.commands) == ["w0", "w1", "w2", "w3"]
    assert all(c == {"op": "stacks"} for _, c in agents.commands)
    assert [(g["ranks"], g["minority"]) for g in res["groups"]] == [([0, 1, 2], False), ([3], True)]
    assert res["groups"][0]["frames"][1]["line"] == 88
    assert [(b["rank"], b["worker"]) for b in res["behind"]] == [(3, "w3")]
    assert all(w["source"] == "agent" and w["error"] is None for w in res["workers"])
    assert "ranks 0-2 (3)" in res["text"] and "rank 3 (1)" in res["text"]
    assert res["elapsed_ms"] > 0 and res["time"] > 0


async def test_a_worker_without_agent_is_read_by_py_spy_on_its_node():
    spied = []

    def pyspy(pid, native, timeout):
        spied.append((pid, native))
        return {"threads": answer(LOOP)["threads"], "error": None, "hint": None}

    ws = [worker("w0", rank=0, task="t", agent=False, node_id="nodeA", pid=4242)]
    svc, agents, relays, _ = service(ws, pyspy=pyspy)
    res = await svc.take(StacksQuery())
    [row] = res["workers"]
    assert row["source"] == "py-spy" and row["threads"] and row["error"] is None
    assert spied == [(4242, False)] and relays.asked == ["nodeA"] and agents.commands == []


async def test_an_agent_that_fails_falls_back_to_py_spy_and_nothing_is_invented_when_both_fail():
    def pyspy(pid, native, timeout):
        return {"threads": [], "error": "ptrace refused", "hint": "add CAP_SYS_PTRACE"}

    svc, _, _, _ = service(ranked(2), lambda wid, c: {"ok": False, "error": "did not answer"}, pyspy=pyspy)
    res = await svc.take(StacksQuery())
    for row in res["workers"]:
        assert row["source"] is None and row["threads"] == []
        assert "agent: did not answer" in row["error"] and "py-spy: ptrace refused" in row["error"]
        assert row["hint"] == "add CAP_SYS_PTRACE"
    assert res["groups"] == []
    assert "no stack: agent: did not answer" in res["text"]


async def test_a_silent_agent_falls_back_to_py_spy_and_the_row_says_the_agent_was_silent():
    spy = {"threads": answer(LOOP)["threads"]}
    svc, _, _, _ = service(ranked(1), lambda wid, c: {"ok": False, "error": "x"}, pyspy=lambda *a: spy)
    [row] = (await svc.take(StacksQuery()))["workers"]
    assert row["source"] == "py-spy" and row["error"] is None
    assert row["hint"] == "Read by py-spy: its agent gave no stacks (x); it may hold the GIL in C."


async def test_a_relay_that_cannot_start_is_the_reason_given():
    ws = [worker("w0", rank=0, task="t", agent=False)]
    svc, _, _, _ = service(ws, relays=FakeRelays(fail=RuntimeError("node is dead")))
    [row] = (await svc.take(StacksQuery()))["workers"]
    assert "no Ray Sleuth agent" in row["error"] and "node is dead" in row["error"]


async def test_silent_agents_cost_one_deadline_for_all_workers_together():
    async def never(wid, c):
        await asyncio.sleep(30)

    async def slow_spy(pid, native, timeout):
        await asyncio.sleep(30)

    svc, _, _, _ = service(ranked(8), never, pyspy=slow_spy)
    t = time.monotonic()
    res = await svc.take(StacksQuery(timeout=0.6))
    assert time.monotonic() - t < 1.5
    assert len(res["workers"]) == 8
    assert all(r["threads"] == [] and "agent: no answer within 0.3 s" in r["error"] for r in res["workers"])


async def test_native_asks_py_spy_first_and_passes_the_flag():
    asked = []

    def pyspy(pid, native, timeout):
        asked.append(native)
        return {"threads": answer(LOOP)["threads"]}

    svc, agents, _, _ = service(ranked(1), lambda wid, c: answer(ALL_REDUCE), pyspy=pyspy)
    [row] = (await svc.take(StacksQuery(native=True)))["workers"]
    assert asked == [True] and row["source"] == "py-spy" and agents.commands == []


async def test_selection_by_job_ranks_and_worker_ids_leaves_idle_pool_workers_out():
    ws = ranked(4) + [
        worker("other", rank=0, task="t", job_id="02000000"),
        worker("pool", state="idle", actor_id=None, task=None, actor_class=None),
        worker("gone", rank=5, state="exited", task="t"),
    ]
    svc, _, _, _ = service(ws, lambda wid, c: answer(LOOP))

    async def ids(**kw):
        return sorted(r["worker"] for r in (await svc.take(**kw))["workers"])

    assert await ids() == ["other", "w0", "w1", "w2", "w3"]
    assert await ids(job="0100") == ["w0", "w1", "w2", "w3"]
    assert await ids(ranks="0-1,3") == ["other", "w0", "w1", "w3"]
    assert await ids(ranks=[2]) == ["w2"]
    assert await ids(workers="poo,w1") == ["pool", "w1"]


def test_bad_queries_are_refused_with_a_hint():
    for params in ({"ranks": "x"}, {"ranks": "3-1"}, {"timeout": "0"}, {"timeout": "soon"}, {"native": "y"}):
        with pytest.raises(BadRequest) as err:
            StacksQuery.from_params(params)
        assert err.value.hint
    q = StacksQuery.from_params(
        {"job": "01", "ranks": "0-2,5", "workers": "a, b", "native": "1", "timeout": "3"}
    )
    assert q == StacksQuery("01", frozenset({0, 1, 2, 5}), ("a", "b"), True, 3.0)


async def test_the_last_step_event_of_each_worker_names_the_one_behind():
    hub = Hub()
    timeline = Timeline(hub)
    for wid, step in (("w0", 41), ("w1", 42), ("w0", 42), ("w2", 42), ("w3", 41)):
        timeline.add_event({"worker": wid, "rank": None, "pid": 1}, "step", 1.0, {"step": step})
    timeline.add_event({"worker": "w1", "rank": 1, "pid": 1}, "loss", 1.0, {"value": 0.1})
    svc, _, _, _ = service(ranked(), lambda wid, c: answer(ALL_REDUCE), timeline=timeline)
    res = await svc.take(StacksQuery())
    assert [w["step"] for w in res["workers"]] == [42, 42, 42, 41]
    assert [(b["rank"], b["why"]) for b in res["behind"]] == [(3, "last step 41; others 42")]
    timeline.add_event({"worker": "w3", "rank": 3, "pid": 1}, "step", 2.0, {"step": 42})
    res = await svc.take(StacksQuery())
    assert res["workers"][3]["step"] == 42 and res["behind"] == []


async def test_flight_recorder_entries_are_tagged_with_their_worker_and_name_the_rank_behind():
    def ans(wid, c):
        rank = int(wid[1:])
        seq = 118 if rank == 3 else 119
        state = "completed" if rank == 3 else "started"
        entry = {"group": "0", "rank": rank, "seq": seq, "op": "gloo:all_reduce", "state": state}
        return dict(answer(LOOP if rank == 3 else ALL_REDUCE), collectives=[entry])

    svc, _, _, _ = service(ranked(), ans)
    res = await svc.take(StacksQuery())
    assert sorted((c["worker"], c["seq"]) for c in res["collectives"])[-1] == ("w3", 118)
    [behind] = res["behind"]
    assert behind["rank"] == 3 and "#118" in behind["why"] and "gloo:all_reduce #119" in behind["why"]


# --- watch mode ---------------------------------------------------------------------------------


def sample(stacks: dict, task="t", job="01"):
    rows = [
        {"worker": wid, "rank": i, "job_id": job, "task": task, "threads": answer(st)["threads"]}
        for i, (wid, st) in enumerate(stacks.items())
    ]
    return {"workers": rows, "groups": [], "collectives": [], "behind": []}


def test_three_equal_samples_raise_one_hang_and_not_again_until_the_stacks_move():
    d = HangDetector(samples=3)
    stuck = sample({"w0": ALL_REDUCE, "w1": LOOP})
    no_steps = lambda wid: None  # noqa: E731
    assert d.feed(stuck, 1.0, no_steps) == []
    assert d.feed(stuck, 2.0, no_steps) == []
    [hang] = d.feed(stuck, 3.0, no_steps)
    assert hang["job_id"] == "01" and hang["ranks_text"] == "0-1" and hang["since"] == 1.0
    assert hang["samples"] == 3 and "job 01" in hang["text"]
    assert d.feed(stuck, 4.0, no_steps) == [] and d.feed(stuck, 5.0, no_steps) == []
    moved = sample({"w0": ALL_REDUCE, "w1": ALL_REDUCE})
    assert d.feed(moved, 6.0, no_steps) == [] and d.feed(moved, 7.0, no_steps) == []
    [again] = d.feed(moved, 8.0, no_steps)  # stuck again, somewhere else: a new hang
    assert again["since"] == 6.0


def test_a_job_whose_steps_advance_or_that_runs_nothing_is_no_hang():
    d = HangDetector(samples=3)
    same = sample({"w0": LOOP})
    seqs = iter(range(1, 100))
    assert [d.feed(same, float(t), lambda wid: next(seqs)) for t in range(6)] == [[]] * 6
    idle = sample({"w0": LOOP}, task=None)
    assert [d.feed(idle, float(t), lambda wid: None) for t in range(6)] == [[]] * 6


async def test_a_sample_is_published_and_a_hang_goes_to_the_stream_and_the_timeline():
    hub = Hub()
    timeline = Timeline(hub)
    stuck = sample({"w0": ALL_REDUCE, "w1": LOOP})

    async def take():
        return dict(stuck, elapsed_ms=12.5)

    class Steps:
        def seq(self, wid):
            return None

    watch = HangWatch(take, Steps(), timeline, hub, clock=lambda: 100.0)
    d = HangDetector(samples=2)
    await watch.sample(d)
    await watch.sample(d)
    await watch.sample(d)
    assert [e for e, _ in hub.published] == ["stacks", "stacks", "hang", "stacks"]
    assert watch.cost_ms == 12.5 and watch.taken == 3 and watch.hangs == 1
    # The stream's `hang` event is light; the case book gets the stacks body (issue 26).
    [(_, published)] = [(e, d) for e, d in hub.published if e == "hang"]
    [(topic, found)] = hub.emitted
    assert "stacks" not in published and topic == "hang-found" and found["stacks"]["workers"]
    [ev] = timeline.events_since(0, HANG_EVENT)
    assert ev["fields"]["job_id"] == "01" and ev["fields"]["samples"] == 2


async def test_the_watch_samples_on_its_own_until_stopped_and_refuses_bad_settings():
    hub = Hub()
    taken = asyncio.Event()
    count = 0

    async def take():
        nonlocal count
        count += 1
        if count >= 3:
            taken.set()
        return dict(sample({"w0": LOOP}), elapsed_ms=1.0)

    class Steps:
        def seq(self, wid):
            return None

    watch = HangWatch(take, Steps(), Timeline(hub), hub)
    status = await watch.start(0.05, 3)
    assert status["on"] and status["interval"] == 0.05
    await asyncio.wait_for(taken.wait(), 5)
    assert (await watch.stop())["on"] is False
    for bad in ((0, 3), (10, 0), (10, 1.5), ("x", 3)):
        with pytest.raises(BadRequest):
            await watch.start(*bad)
    await watch.close()
