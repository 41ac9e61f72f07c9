"""The agent's side of the hang radar: every thread's stack, read from another thread, without
the agent's own threads; the `stacks` command answers with how long the walk took."""

from __future__ import annotations

import threading

from raysleuth.agent import commands
from raysleuth.agent.stacks import dump_threads


def parked(ready: threading.Event, go: threading.Event) -> None:
    ready.set()
    go.wait(30)  # @bp parked


def start(name: str):
    ready, go = threading.Event(), threading.Event()
    t = threading.Thread(target=parked, args=(ready, go), name=name, daemon=True)
    t.start()
    assert ready.wait(10)
    return t, go


def test_a_thread_waiting_in_c_shows_its_frames_innermost_first_with_source_lines():
    t, go = start("loader")
    try:
        threads = {x["name"]: x for x in dump_threads()}
        frames = threads["loader"]["frames"]
        mine = next(i for i, f in enumerate(frames) if f["function"] == "parked")
        assert frames[mine]["path"] == __file__ and frames[mine]["code"] == "go.wait(30)  # @bp parked"
        assert frames[0]["function"] == "wait"  # threading.Event.wait, inside `parked`
        assert frames[-1]["function"] == "_bootstrap"
        assert threads["loader"]["id"] == t.ident and threads["loader"]["main"] is False
    finally:
        go.set()


def test_the_agents_own_threads_and_the_caller_are_left_out_and_main_comes_first():
    own, go_own = start("raysleuth-agent")
    other, go_other = start("worker-pool")
    try:
        names = [x["name"] for x in dump_threads()]
        assert "raysleuth-agent" not in names and "worker-pool" in names
        everything = [x["name"] for x in dump_threads(skip_own=False)]
        assert "raysleuth-agent" in everything
    finally:
        go_own.set()
        go_other.set()
    answer = {}
    reader = threading.Thread(target=lambda: answer.update(commands.run(None, {"op": "stacks"})))
    reader.start()
    reader.join(10)
    assert answer["ok"] is True and isinstance(answer["collectives"], list)
    assert 0 < answer["walk_ms"] < 1000
    assert answer["threads"][0]["main"] is True and answer["threads"][0]["name"] == "MainThread"
    assert reader.name not in [x["name"] for x in answer["threads"]]
