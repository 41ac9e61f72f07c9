"""The hang radar's grouping, the lagging rank and the text view (raysleuth/model/stacks.py)."""

from __future__ import annotations

from raysleuth.model.stacks import (
    find_behind,
    format_text,
    group_stacks,
    rank_ranges,
    stack_signature,
    summary,
)

TORCH = "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"
LOGGER = "/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py"
RAY = "/venv/lib/python3.11/site-packages/ray/_private/worker.py"
TRAIN = "/home/u/proj/train.py"
DATA = "/home/u/proj/data.py"


def frame(path, line, function, code=None):
    return {"path": path, "line": line, "function": function, "code": code}


IN_ALL_REDUCE = [
    frame(TORCH, 2801, "all_reduce", "work = group.allreduce([tensor], opts)"),
    frame(LOGGER, 83, "wrapper"),
    frame(TRAIN, 88, "train_step", "dist.all_reduce(t)"),
    frame(TRAIN, 120, "fit", "loss = train_step(batch)"),
    frame(RAY, 900, "main_loop"),
]
IN_LOADER = [
    frame(DATA, 42, "__next__", "time.sleep(0.1)"),
    frame(TRAIN, 118, "fit", "batch = next(it)"),
    frame(RAY, 900, "main_loop"),
]


def worker(wid, rank, frames, job="01000000", step=None, error=None, threads=None):
    if threads is None:
        threads = [] if frames is None else [
            {"name": "Thread-1 (agent)", "id": 2, "main": False, "frames": [frame(RAY, 5, "run")]},
            {"name": "MainThread", "id": 1, "main": True, "frames": frames},
        ]  # fmt: skip
    return {
        "worker": wid,
        "rank": rank,
        "pid": 1000 + (rank or 0),
        "node_id": "n1",
        "job_id": job,
        "actor_class": "RayTrainWorker",
        "task": None,
        "source": None if error else "agent",
        "error": error,
        "hint": None,
        "step": step,
        "threads": threads,
    }


def eight_ranks_one_in_the_loader():
    return [worker(f"w{r}", r, IN_LOADER if r == 3 else IN_ALL_REDUCE) for r in range(8)]


def test_rank_ranges_writes_runs_sorted_and_once():
    assert rank_ranges([0, 1, 2, 4]) == "0-2,4"
    assert rank_ranges([7, 5, 6, 0, 1, 2, 4, 4]) == "0-2,4-7"
    assert rank_ranges([3]) == "3"
    assert rank_ranges([]) == ""


def test_eight_ranks_seven_at_the_all_reduce_and_rank_3_apart_make_two_groups():
    groups = group_stacks(eight_ranks_one_in_the_loader())
    assert [(g["ranks_text"], g["count"], g["minority"]) for g in groups] == [
        ("0-2,4-7", 7, False),
        ("3", 1, True),
    ]
    big, small = groups
    assert big["ranks"] == [0, 1, 2, 4, 5, 6, 7]
    assert big["workers"] == ["w0", "w1", "w2", "w4", "w5", "w6", "w7"]
    assert big["frames"] == IN_ALL_REDUCE and small["frames"] == IN_LOADER
    assert big["job_id"] == small["job_id"] == "01000000"


def test_the_grouping_looks_at_the_main_thread_only():
    a = worker("a", 0, IN_ALL_REDUCE)
    b = worker("b", 1, IN_ALL_REDUCE)
    b["threads"][0]["frames"] = [frame(RAY, 77, "other_place")]  # the agent's thread differs
    assert [g["count"] for g in group_stacks([a, b])] == [2]


def test_a_different_line_in_the_same_function_is_another_group():
    moved = [dict(IN_ALL_REDUCE[0], line=2802)] + IN_ALL_REDUCE[1:]
    groups = group_stacks([worker("a", 0, IN_ALL_REDUCE), worker("b", 1, moved)])
    assert len(groups) == 2


def test_a_tie_flags_no_minority_but_a_smaller_third_group_is_flagged():
    tie = [worker(f"w{r}", r, IN_ALL_REDUCE if r < 2 else IN_LOADER) for r in range(4)]
    assert [g["minority"] for g in group_stacks(tie)] == [False, False]
    third = tie + [worker("w4", 4, [frame(TRAIN, 5, "setup")])]
    assert [(g["ranks_text"], g["minority"]) for g in group_stacks(third)] == [
        ("0-1", False),
        ("2-3", False),
        ("4", True),
    ]


def test_one_group_is_never_a_minority():
    assert [g["minority"] for g in group_stacks([worker("a", 0, IN_ALL_REDUCE)])] == [False]


def test_workers_of_two_jobs_are_never_grouped_together():
    ws = [worker(f"a{r}", r, IN_ALL_REDUCE, job="01") for r in range(2)]
    ws += [worker(f"b{r}", r, IN_ALL_REDUCE, job="02") for r in range(3)]
    ws.append(worker("b3", 3, IN_LOADER, job="02"))
    groups = group_stacks(ws)
    assert [(g["job_id"], g["ranks_text"], g["minority"]) for g in groups] == [
        ("01", "0-1", False),
        ("02", "0-2", False),
        ("02", "3", True),
    ]


def test_workers_without_a_stack_are_in_no_group():
    ws = eight_ranks_one_in_the_loader()
    ws[5] = worker("w5", 5, None, error="no answer within 2.0 s")
    groups = group_stacks(ws)
    assert [(g["ranks_text"], g["count"]) for g in groups] == [("0-2,4,6-7", 6), ("3", 1)]
    assert all("w5" not in g["workers"] for g in groups)


def test_workers_without_a_rank_group_by_id():
    groups = group_stacks([worker("x", None, IN_LOADER), worker("y", None, IN_LOADER)])
    assert groups[0]["ranks"] == [] and groups[0]["workers"] == ["x", "y"]
    assert groups[0]["ranks_text"] == ""


def test_a_py_spy_dump_without_a_main_mark_groups_by_its_first_thread():
    threads = [{"name": "MainThread", "id": 1, "main": False, "frames": IN_LOADER}]
    a = worker("a", 0, None, threads=threads)
    assert stack_signature(a) == tuple((f["path"], f["function"], f["line"]) for f in IN_LOADER)
    assert group_stacks([a, worker("b", 1, IN_LOADER)])[0]["count"] == 2


def test_signature_is_empty_without_a_stack_and_ignores_the_code_text():
    assert stack_signature(worker("a", 0, None, error="gone")) == ()
    other_code = [dict(f, code="changed") for f in IN_LOADER]
    assert stack_signature(worker("a", 0, IN_LOADER)) == stack_signature(worker("b", 0, other_code))


def collective(wid, rank, seq, state, op="gloo:all_reduce", group="0"):
    return {"group": group, "rank": rank, "worker": wid, "seq": seq, "op": op, "state": state}


def test_the_rank_one_collective_behind_is_named_by_sequence_number():
    ws = [worker(f"w{r}", r, IN_LOADER if r == 3 else IN_ALL_REDUCE) for r in range(4)]
    cs = [collective(f"w{r}", r, 119, "started") for r in range(3)]
    cs.append(collective("w3", 3, 118, "completed"))
    behind = find_behind(ws, group_stacks(ws), cs)
    assert behind == [
        {"rank": 3, "worker": "w3", "why": "rank 3 last entered #118; ranks 0-2 wait in gloo:all_reduce #119"}
    ]


def test_a_collective_whose_name_the_agent_did_not_read_is_just_a_collective():
    ws = [worker(f"w{r}", r, IN_ALL_REDUCE) for r in range(2)]
    cs = [collective("w0", 0, 5, "started", op="?"), collective("w1", 1, 4, "completed", op="?")]
    result = {"workers": ws, "groups": group_stacks(ws), "collectives": cs}
    [b] = result["behind"] = find_behind(ws, result["groups"], cs)
    assert b["why"] == "rank 1 last entered #4; rank 0 wait in collective #5"
    text = format_text(result)
    assert "process group 0: rank 0 at collective #5 (started); rank 1 at collective #4 (completed)" in text


def test_collectives_beat_steps_and_an_even_process_group_names_nobody():
    ws = [worker(f"w{r}", r, IN_ALL_REDUCE, step=10) for r in range(4)]
    ws[1]["step"] = 9
    even = [collective(f"w{r}", r, 50, "completed") for r in range(4)]
    assert find_behind(ws, group_stacks(ws), even) == [
        {"rank": 1, "worker": "w1", "why": "last step 9; others 10"}
    ]
    sub = even + [
        collective("w2", 0, 7, "started", group="1"),
        collective("w3", 1, 6, "completed", group="1"),
    ]
    [b] = find_behind(ws, group_stacks(ws), sub)
    assert b["worker"] == "w3" and b["rank"] == 3  # the worker's own rank, not its rank in group 1
    assert b["why"] == "rank 3 last entered #6; rank 2 wait in gloo:all_reduce #7"


def test_without_collectives_or_steps_the_minority_is_behind():
    ws = eight_ranks_one_in_the_loader()
    assert find_behind(ws, group_stacks(ws), []) == [
        {"rank": 3, "worker": "w3", "why": "stack differs from ranks 0-2,4-7 (7 of 8)"}
    ]


def test_an_unranked_task_of_a_ranked_job_is_never_behind():
    """Issue 25: the demo's `prefetch_batch` task (no rank) stood elsewhere than ranks 0-3 and was
    named behind. In a job with ranks only ranks are compared; a minority rank still is."""
    ranks = [worker(f"w{r}", r, IN_ALL_REDUCE) for r in range(4)]
    helper = worker("t1", None, IN_LOADER)
    groups = group_stacks([*ranks, helper])
    assert [(g["ranks_text"], g["count"], g["minority"]) for g in groups] == [
        ("0-3", 4, False),
        ("", 1, False),
    ]
    assert find_behind([*ranks, helper], groups, []) == []
    odd = [*ranks[:3], worker("w3", 3, IN_LOADER), helper]
    assert find_behind(odd, group_stacks(odd), []) == [
        {"rank": 3, "worker": "w3", "why": "stack differs from ranks 0-2 (3 of 4)"}
    ]


def test_a_tie_names_nobody_behind():
    ws = [worker(f"w{r}", r, IN_ALL_REDUCE if r < 2 else IN_LOADER) for r in range(4)]
    assert find_behind(ws, group_stacks(ws), []) == []


def test_each_job_is_judged_on_its_own():
    ws = [worker(f"a{r}", r, IN_ALL_REDUCE, job="01", step=5 - (r == 1)) for r in range(2)]
    ws += [worker(f"b{r}", r, IN_LOADER if r == 0 else IN_ALL_REDUCE, job="02") for r in range(3)]
    cs = [
        collective("b1", 1, 3, "started"),
        collective("b2", 2, 3, "started"),
        collective("b0", 0, 2, "completed"),
    ]
    cs.append(collective("a0", 0, 1, "started"))  # job 01's collectives never mix with job 02's
    assert [(b["worker"], b["why"]) for b in find_behind(ws, group_stacks(ws), cs)] == [
        ("a1", "last step 4; others 5"),
        ("b0", "rank 0 last entered #2; ranks 1-2 wait in gloo:all_reduce #3"),
    ]


def test_summary_names_the_library_call_then_the_users_frames():
    assert summary(IN_ALL_REDUCE) == "all_reduce ← train_step train.py:88 ← fit train.py:120"
    in_ray_get = [
        frame(RAY, 2800, "get_objects"),
        frame(RAY, 2900, "get"),
        frame(RAY, 20, "wrapper"),
        frame(RAY, 10, "auto_init_wrapper"),
        frame(TRAIN, 7, "main"),
    ]
    assert summary(in_ray_get) == "get ← main train.py:7"
    assert summary(IN_LOADER) == "__next__ data.py:42 ← fit train.py:118"
    deep = [frame(TRAIN, n, f"f{n}") for n in range(5)]
    assert summary(deep) == "f0 train.py:0 ← f1 train.py:1 ← f2 train.py:2 ← …"
    idle = [frame(RAY, 1, "get"), frame(RAY, 2, "main_loop")]
    assert summary(idle) == "get worker.py:1 ← main_loop worker.py:2"


def test_the_text_shows_groups_frames_missing_workers_collectives_and_who_is_behind():
    ws = [
        worker(f"w{r}", r, IN_LOADER if r == 3 else IN_ALL_REDUCE[:1] + IN_ALL_REDUCE[2:]) for r in range(8)
    ]
    ws[6] = worker("w6", 6, None, error="no answer within 2.0 s")
    ws[6]["hint"] = "py-spy could not read it either"
    groups = group_stacks(ws)
    cs = [collective(f"w{r}", r, 119, "started") for r in (0, 1, 2, 4, 5, 7)]
    cs.append(collective("w3", 3, 118, "completed"))
    result = {"workers": ws, "groups": groups, "collectives": cs, "behind": find_behind(ws, groups, cs)}
    lines = format_text(result).splitlines()
    assert lines[0] == "job 01000000: 8 worker(s)"
    assert lines[1] == "  ranks 0-2,4-5,7 (6): all_reduce ← train_step train.py:88 ← fit train.py:120"
    assert lines[2] == f"      all_reduce  {TORCH}:2801 | work = group.allreduce([tensor], opts)"
    assert "  rank 3 (1): __next__ data.py:42 ← fit train.py:118  <- minority" in lines
    assert "  rank 6 (pid 1006): no stack: no answer within 2.0 s" in lines
    assert "      hint: py-spy could not read it either" in lines
    assert (
        "  process group 0: ranks 0-2,4-5,7 at gloo:all_reduce #119 (started); "
        "rank 3 at gloo:all_reduce #118 (completed)"
    ) in lines
    assert lines[-1] == (
        "  behind: rank 3: rank 3 last entered #118; ranks 0-2,4-5,7 wait in gloo:all_reduce #119"
    )


def test_the_text_of_two_jobs_has_a_block_each_and_of_nothing_says_so():
    ws = [worker("a", 0, IN_LOADER, job="01"), worker("b", 0, IN_LOADER, job="02")]
    text = format_text({"workers": ws, "groups": group_stacks(ws), "collectives": [], "behind": []})
    assert text.count("job 0") == 2 and text.count("rank 0 (1): __next__ data.py:42") == 2
    assert format_text({"workers": [], "groups": []}) == "no workers selected"
