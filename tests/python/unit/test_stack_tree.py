"""The parallel stack tree (issue 27): four ranks where rank 3 stands elsewhere give one branch
point with ranks 0-2 and 3; the text marks it; a thousand workers merge."""

from __future__ import annotations

from raysleuth.cli.stacks import format_trees
from raysleuth.model.stacktree import format_tree, job_tree, stack_trees

MAIN = "/venv/lib/python3.11/site-packages/ray/_private/workers/default_worker.py"
TRAIN = "/home/u/train.py"


def frames(*where):
    """Innermost first, as a stack row lists them."""
    return [{"path": p, "line": line, "function": fn} for p, fn, line in where]


IN_ALL_REDUCE = frames((TRAIN, "all_reduce_grads", 88), (TRAIN, "fit", 120), (MAIN, "main_loop", 290))
IN_LOADER = frames((TRAIN, "next_batch", 42), (TRAIN, "fit", 118), (MAIN, "main_loop", 290))


def row(wid, rank, stack, job="01"):
    threads = [{"name": "MainThread", "id": 1, "main": True, "frames": stack}]
    return {"worker": wid, "rank": rank, "job_id": job, "threads": threads}


def test_four_ranks_part_at_fit_into_ranks_0_2_and_rank_3():
    rows = [row(f"w{r}", r, IN_LOADER if r == 3 else IN_ALL_REDUCE) for r in range(4)]
    tree = job_tree(rows, "01")
    # No frame of the user's is common to all (fit at two lines): they part at the job's root;
    # Ray's main_loop is a library frame, kept as the way in (`via`) of each user frame (#38).
    assert (tree["function"], tree["ranks"], tree["branch"]) == ("job 01", [0, 1, 2, 3], True)
    parts = [(c["function"], c["line"], c["ranks"]) for c in tree["children"]]
    assert parts == [("fit", 120, [0, 1, 2]), ("fit", 118, [3])]  # the same function, other lines
    assert [f["function"] for f in tree["children"][0]["via"]] == ["main_loop"]
    assert tree["children"][0]["children"][0]["function"] == "all_reduce_grads"
    branch_points = []

    def walk(n):
        if n["branch"]:
            branch_points.append(n)
        for c in n["children"]:
            walk(c)

    walk(tree)
    assert len(branch_points) == 1 and branch_points[0] is tree
    text = format_tree(tree)
    assert text[0] == "job 01  ranks 0-3 (4)  <- ranks part here"
    assert "  fit train.py:120  ranks 0-2 (3)  (via 1 library frame)" in text
    assert "  fit train.py:118  ranks 3 (1)  (via 1 library frame)" in text


def test_one_tree_per_job_and_the_cli_prints_them():
    rows = [row("a0", 0, IN_ALL_REDUCE, "01"), row("b0", 0, IN_LOADER, "02"), row("b1", 1, IN_LOADER, "02")]
    trees = stack_trees(rows)
    assert [(t["job_id"], t["ranks"], t["branch"]) for t in trees] == [
        ("01", [0], False),
        ("02", [0, 1], False),
    ]
    text = format_trees({"tree": trees})
    assert text.startswith("job 01:\n  fit train.py:120  ranks 0 (1)  (via 1 library frame)")
    assert "job 02:" in text and format_trees({"tree": []}) == "No stacks."


def test_workers_whose_outermost_frames_differ_hang_under_a_job_node():
    other = frames((TRAIN, "helper", 7), ("/home/u/other_main.py", "main", 3))
    tree = job_tree([row("w0", 0, IN_ALL_REDUCE), row("t1", None, other)], "01")
    assert tree["function"] == "job 01" and tree["branch"] and tree["ranks"] == [0]
    assert len(tree["workers"]) == 2


def test_a_thousand_workers_merge_into_two_branches_with_every_worker_counted():
    """(How fast: bench/stack_tree.py.)"""
    rows = [row(f"w{r}", r, IN_LOADER if r % 97 == 3 else IN_ALL_REDUCE) for r in range(1000)]
    tree = job_tree(rows, "01")
    assert len(tree["workers"]) == 1000 and tree["branch"]
    assert [len(c["workers"]) for c in tree["children"]] == [989, 11]


def test_the_collectives_queue_marks_the_rank_behind():
    from raysleuth.cli.collectives import format_queue
    from raysleuth.model.stacks import collectives_queue

    workers = [{"worker": f"w{r}", "rank": r} for r in range(3)]
    coll = [
        {
            "worker": "w0",
            "group": "0",
            "rank": 0,
            "seq": 8,
            "started": 8,
            "completed": 7,
            "op": "gloo:all_reduce",
            "state": "started",
        },
        {
            "worker": "w2",
            "group": "0",
            "rank": 2,
            "seq": 7,
            "started": 7,
            "completed": 7,
            "op": "?",
            "state": "completed",
        },
        {
            "worker": "w1",
            "group": "0",
            "rank": 1,
            "seq": 8,
            "started": 8,
            "completed": 7,
            "op": "gloo:all_reduce",
            "state": "started",
        },
    ]
    rows = collectives_queue(coll, workers, [{"worker": "w2", "rank": 2, "why": "..."}])
    assert [(r["rank"], r["last_enqueued"], r["last_completed"], r["behind"]) for r in rows] == [
        (0, 8, 7, False), (1, 8, 7, False), (2, 7, 7, True),
    ]  # fmt: skip
    assert rows[2]["op"] == "collective"
    text = format_queue(rows).splitlines()
    assert text[0].split() == ["GROUP", "RANK", "ENQUEUED", "STARTED", "COMPLETED", "OP"]
    assert text[3].endswith("<- behind") and text[3].split()[:2] == ["0", "2"]
