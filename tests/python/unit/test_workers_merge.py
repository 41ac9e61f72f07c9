"""Rules for merging agent reports with Ray's State API into the worker table."""

from raysleuth.broker.workers.snapshot import (
    NODE_DIED,
    STALE_AFTER_S,
    StateSnapshot,
    merge_nodes,
    merge_workers,
    settle_dead_nodes,
)

NOW = 1_000_000.0
NODE = "n1" * 28


def sw(worker_id, pid, alive=True, **kw):
    d = {
        "worker_id": worker_id,
        "pid": pid,
        "node_id": NODE,
        "ip": "127.0.0.1",
        "is_alive": alive,
        "worker_type": "WORKER",
        "end_time_ms": 0,
        "num_paused_threads": None,
    }
    d.update(kw)
    return d


def actor(actor_id, pid, cls="Learner", **kw):
    d = {
        "actor_id": actor_id,
        "pid": pid,
        "node_id": NODE,
        "class_name": cls,
        "state": "ALIVE",
        "name": "",
        "job_id": "01000000",
        "ray_namespace": "user",
    }
    d.update(kw)
    return d


def report(worker_id, pid, rank=None, **kw):
    d = {
        "id": worker_id,
        "pid": pid,
        "node_id": NODE,
        "node_ip": "127.0.0.1",
        "job_id": "01000000",
        "rank": rank,
        "world_size": 4,
        "gpu_ids": [],
        "python": "3.11.7",
        "state": "running",
        "received": NOW - 1,
        "goodbye": None,
    }
    d.update(kw)
    return d


def by_id(workers):
    return {w.id: w for w in workers}


def test_agent_fields_join_state_api_worker():
    state = StateSnapshot(workers=[sw("w1", 11)], actors=[actor("a1", 11)], time=NOW)
    [w] = merge_workers([report("w1", 11, rank=2)], state, NOW)
    got = (w.agent, w.rank, w.actor_class, w.actor_id, w.state)
    assert got == (True, 2, "Learner", "a1", "idle")


def test_worker_without_agent_is_listed_and_marked():
    state = StateSnapshot(workers=[sw("w1", 11)], actors=[], time=NOW)
    [w] = merge_workers([], state, NOW)
    assert w.agent is False and w.state == "idle" and w.pid == 11


def test_running_task_from_state_api_names_the_task():
    state = StateSnapshot(
        workers=[sw("w1", 11)],
        tasks=[{"worker_id": "w1", "name": "slow_task", "job_id": "02000000"}],
        time=NOW,
    )
    [w] = merge_workers([], state, NOW)
    assert (w.state, w.task, w.job_id) == ("running", "slow_task", "02000000")


def test_dead_worker_becomes_exited_even_with_a_fresh_report():
    state = StateSnapshot(workers=[sw("w1", 11, alive=False, end_time_ms=(NOW - 5) * 1000)], time=NOW)
    [w] = merge_workers([report("w1", 11, rank=0)], state, NOW)
    assert w.state == "exited"


def test_agent_goodbye_marks_exited():
    [w] = merge_workers([report("w1", 11, goodbye={"reason": "exit", "time": NOW})], None, NOW)
    assert w.state == "exited"


def test_silent_agent_unknown_to_ray_goes_stale():
    reps = [report("w1", 11, received=NOW - STALE_AFTER_S - 1), report("w2", 12)]
    ws = by_id(merge_workers(reps, None, NOW))
    assert ws["w1"].state == "exited" and ws["w2"].state == "idle"


def test_a_snapshot_from_before_the_dashboard_went_down_does_not_keep_a_silent_agent_alive():
    """Ray's dashboard down: the last snapshot still lists w1 alive, but once that snapshot is
    older than the stale bound it no longer vouches, and w1's silent agent turns it `exited`;
    w2, still reporting, stays live. A fresh snapshot does vouch (a paused worker is silent)."""
    silent = NOW - STALE_AFTER_S - 1
    reps = [report("w1", 11, received=silent), report("w2", 12)]
    old = StateSnapshot(workers=[sw("w1", 11), sw("w2", 12)], time=NOW - STALE_AFTER_S - 5)
    ws = by_id(merge_workers(reps, old, NOW))
    assert ws["w1"].state == "exited" and ws["w2"].state == "idle"
    fresh = StateSnapshot(workers=[sw("w1", 11), sw("w2", 12)], time=NOW - 1)
    assert by_id(merge_workers(reps, fresh, NOW))["w1"].state == "idle"


def test_a_worker_on_a_dead_node_is_dead_even_if_rays_worker_list_says_alive():
    """Ray keeps a removed node's workers `is_alive` (their raylet is gone): a paused one would
    stay paused here for good. Settled, it is exited."""
    other = "n2" * 28
    nodes = [
        {"node_id": NODE, "state": "ALIVE"},
        {"node_id": other, "state": "DEAD", "state_message": "removed", "end_time_ms": (NOW - 3) * 1000},
    ]
    snap = StateSnapshot(
        workers=[sw("w1", 11), sw("w2", 12, node_id=other, num_paused_threads=1)], nodes=nodes, time=NOW
    )
    settled = settle_dead_nodes(snap)
    lost = settled.workers[1]
    assert not lost["is_alive"] and lost["exit_type"] == NODE_DIED and "removed" in lost["exit_detail"]
    assert snap.workers[1]["is_alive"], "the snapshot given is left as it was"
    reps = [report("w2", 12, node_id=other, state="paused", paused_at={"path": "/x.py", "line": 3})]
    ws = by_id(merge_workers(reps, settled, NOW))
    assert ws["w1"].state == "idle" and ws["w2"].state == "exited" and ws["w2"].paused_at is None
    assert settle_dead_nodes(StateSnapshot(workers=[sw("w1", 11)], nodes=nodes[:1])).workers[0]["is_alive"]


def test_drivers_and_raysleuth_own_actors_are_hidden():
    own = actor("r1", 13, cls="SleuthRegistry", ray_namespace="raysleuth")
    state = StateSnapshot(
        workers=[sw("d1", 10, worker_type="DRIVER"), sw("r", 13), sw("w1", 11)], actors=[own], time=NOW
    )
    assert [w.id for w in merge_workers([], state, NOW)] == ["w1"]


def test_users_class_named_like_ours_in_their_namespace_is_shown():
    theirs = actor("x", 13, cls="NodeRelay", ray_namespace="user")
    state = StateSnapshot(workers=[sw("w", 13)], actors=[theirs], time=NOW)
    assert [w.actor_class for w in merge_workers([], state, NOW)] == ["NodeRelay"]


def test_a_reused_pid_joins_a_live_worker_to_a_live_actor_and_an_ended_one_to_its_dead_actor():
    """pids are reused (32768 on a Linux default): an actor that ended with pid 11 must not name
    the live worker that has pid 11 now, and the ended worker keeps its own actor."""
    end = (NOW - 5) * 1000
    old, new = actor("a-old", 11, cls="OldActor", state="DEAD"), actor("a-new", 11, cls="NewActor")
    gone = sw("w-old", 11, alive=False, end_time_ms=end)
    state = StateSnapshot(workers=[sw("w-new", 11), gone], actors=[old, new], time=NOW)
    got = {w.id: (w.actor_class, w.state) for w in merge_workers([], state, NOW)}
    assert got == {"w-new": ("NewActor", "idle"), "w-old": ("OldActor", "exited")}
    # A task worker with the pid, no actor alive on it: no actor named.
    state = StateSnapshot(workers=[sw("w-task", 11), gone], actors=[old], time=NOW)
    assert by_id(merge_workers([], state, NOW))["w-task"].actor_class is None


def test_a_users_worker_with_the_pid_of_an_ended_raysleuth_actor_is_shown():
    own = actor("r1", 13, cls="SleuthRegistry", ray_namespace="raysleuth", state="DEAD")
    state = StateSnapshot(
        workers=[sw("r", 13, alive=False, end_time_ms=(NOW - 5) * 1000), sw("w", 13)], actors=[own], time=NOW
    )
    assert [w.id for w in merge_workers([], state, NOW)] == ["w"]


def test_paused_by_ray_debugger_threads_shows_paused():
    state = StateSnapshot(workers=[sw("w1", 11, num_paused_threads=1)], time=NOW)
    assert merge_workers([], state, NOW)[0].state == "paused"


def test_live_workers_sorted_by_rank_then_exited_newest_first():
    reps = [report("w3", 3, rank=3), report("w0", 1, rank=0), report("wx", 9, rank=None)]
    state = StateSnapshot(
        workers=[
            sw("w0", 1),
            sw("w3", 3),
            sw("wx", 9),
            sw("old", 5, alive=False, end_time_ms=(NOW - 100) * 1000),
            sw("new", 6, alive=False, end_time_ms=(NOW - 10) * 1000),
            sw("ancient", 7, alive=False, end_time_ms=(NOW - 10_000) * 1000),
        ],
        time=NOW,
    )
    assert [w.id for w in merge_workers(reps, state, NOW)] == ["w0", "w3", "wx", "new", "old"]


def test_nodes_count_live_workers():
    nodes = [
        {"node_id": NODE, "node_ip": "127.0.0.1", "state": "ALIVE", "is_head_node": True},
        {"node_id": "n2", "node_ip": "127.0.0.2", "state": "DEAD", "is_head_node": False},
    ]
    state = StateSnapshot(workers=[sw("w1", 11), sw("w2", 12, alive=False)], nodes=nodes, time=NOW)
    got = merge_nodes(state, merge_workers([], state, NOW))
    assert [(n["node_id"], n["alive"], n["workers"]) for n in got] == [(NODE, True, 1), ("n2", False, 0)]


def test_every_worker_has_exactly_the_contract_fields():
    from raysleuth.broker.workers.snapshot import WORKER_FIELDS

    state = StateSnapshot(workers=[sw("w1", 11)], actors=[actor("a1", 11)], time=NOW)
    [w] = merge_workers([report("w1", 11, rank=1, extra="x")], state, NOW)
    assert tuple(w.to_json()) == WORKER_FIELDS and "extra" not in w.to_json()


def test_a_worker_held_after_a_crash_shows_crashed_at_the_raise_line():
    state = StateSnapshot(workers=[sw("w1", 11)], actors=[actor("a1", 11)], time=NOW)
    at = {"path": "/job.py", "line": 28, "reason": "exception"}
    rep = report("w1", 11, rank=0, state="crashed", paused_at=at, crash="c-1", held_until=NOW + 120)
    [w] = merge_workers([rep], state, NOW)
    assert (w.state, w.paused_at, w.crash, w.held_until) == ("crashed", at, "c-1", NOW + 120)
    # Once let go (the report says running again) it is an ordinary live worker.
    [w] = merge_workers([report("w1", 11, rank=0)], state, NOW)
    assert (w.state, w.crash, w.held_until) == ("idle", None, None)
