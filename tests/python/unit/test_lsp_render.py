"""Lens titles, their click commands and hover text from the broker's workers and crashes
(lsp/render.py): the parts the live test's cluster cannot show (a paused worker, GPU memory)."""

from __future__ import annotations

from raysleuth.lsp.remotes import RemoteDef
from raysleuth.lsp.render import hover_markdown, lens_parts
from raysleuth.lsp.source import Span
from raysleuth.model.worker import Worker

SPAN = Span(0, 0, 0, 10)
LEARNER = RemoteDef("Learner", "actor", SPAN, SPAN, "decorator")
SHARD = RemoteDef("shard_loss", "function", SPAN, SPAN, "decorator")
GIB = 2**30


def learner(wid: str, rank: int, state: str = "idle", **kw) -> Worker:
    return Worker(id=wid, pid=100 + rank, actor_class="Learner", rank=rank, world_size=4, state=state, **kw)


WORKERS = [
    learner("w3", 3, "crashed", crash="c1", paused_at={"path": "/x.py", "line": 9, "reason": "exception"}),
    learner("w1", 1, "paused", paused_at={"path": "/x.py", "line": 12, "reason": "breakpoint"}),
    learner("w0", 0, gpu_memory={"used_bytes": int(3.5 * GIB), "peak_bytes": 4 * GIB, "growing": True}),
    learner("w2", 2),
    learner("gone", 5, "exited"),
    Worker(id="t1", pid=300, task="jobs.shard_loss", state="running"),
    Worker(id="t2", pid=301, actor_class="Other", task="shard_loss", state="running"),
]
CRASH = {
    "id": "c1",
    "kind": "exception",
    "exc_type": "FloatingPointError",
    "message": "loss is nan\nat step 40",
    "hint": None,
    "worker": learner("w3", 3).to_json(),
}


def test_lens_parts_count_live_workers_and_say_what_a_click_does():
    parts = lens_parts(LEARNER, WORKERS, [CRASH])
    assert [p.title for p in parts] == ["4 workers", "1 paused", "1 crashed"]
    reveal, attach, crash = parts
    assert reveal.command == "raySleuth.revealWorkers"
    assert reveal.arguments == [{"name": "Learner", "kind": "actor", "workers": ["w0", "w1", "w2", "w3"]}]
    assert (attach.command, attach.arguments) == ("raySleuth.attachWorker", ["w1"])
    assert (crash.command, crash.arguments) == ("raySleuth.inspectCrash", ["c1"])


def test_a_function_matches_the_task_it_runs_not_an_actor_method_of_that_name():
    parts = lens_parts(SHARD, WORKERS, [])
    assert [p.title for p in parts] == ["1 worker"]
    assert parts[0].arguments[0]["workers"] == ["t1"]


def test_hover_lists_ranks_with_state_gpu_memory_and_the_last_crash():
    text = hover_markdown(LEARNER, WORKERS, [CRASH])
    rows = [r for r in text.splitlines() if r.startswith("| ") and "---" not in r][1:]
    assert [r.split("|")[1].strip() for r in rows] == ["0", "1", "2", "3"]
    assert "3.5 GiB (peak 4.0) ↑" in rows[0]
    assert "paused at line 12" in rows[1]
    assert "Last crash (rank 3): `FloatingPointError: loss is nan at step 40`" in text


def test_hover_without_a_broker_says_so():
    assert "No Ray Sleuth broker connected" in hover_markdown(LEARNER, None, [])
