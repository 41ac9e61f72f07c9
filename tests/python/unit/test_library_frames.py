"""Library frames stay out of the way (issue #38): verl 0.9.1's dispatch wrappers, Ray's Cython
executor and the standard library are marked `library`, the stack tree forks on the user's code,
`raysleuth stacks` folds them unless `--all-frames`, the DAP stack dims them and names no
made-up source, and a crash's top frame is the user's.

The frames are those of a real verl 0.9.1 worker (`pip download --no-deps verl==0.9.1`): a
`@register(dispatch_mode=Dispatch.ONE_TO_ALL)` method of a colocated `WorkerDict` runs under
`verl/single_controller/ray/base.py` `func`, `verl/single_controller/base/decorator.py` `inner`
(line 431) and `verl/utils/transferqueue_utils.py` `inner` (line 378).
"""

from __future__ import annotations

import argparse

from raysleuth.broker.debug.rayframes import NO_SOURCE_ORIGIN, tidy, user_top
from raysleuth.cli.stacks import format_trees, query_path
from raysleuth.model import frames as lib
from raysleuth.model.stacks import format_text, group_stacks, summary
from raysleuth.model.stacktree import format_tree, job_tree

SP = "/venv/lib/python3.11/site-packages/"
TQ = SP + "verl/utils/transferqueue_utils.py"
DECO = SP + "verl/single_controller/base/decorator.py"
VERL_RAY = SP + "verl/single_controller/ray/base.py"
RAYLET = "python/ray/_raylet.pyx"  # as Cython names it: no such file anywhere
ROLES = "/home/u/proj/roles.py"
EXECUTOR = [
    (SP + "ray/util/tracing/tracing_helper.py", "_resume_span", 463),
    (SP + "ray/_private/function_manager.py", "actor_method_executor", 689),
    (RAYLET, "execute_task", 1811),
    (RAYLET, "run_task_loop", 2990),
    (SP + "ray/_private/worker.py", "main_loop", 1012),
    (SP + "ray/_private/workers/default_worker.py", "<module>", 289),
]
VERL = [(TQ, "inner", 378), (DECO, "inner", 431), (VERL_RAY, "func", 934)]


def frames(*where):
    return [{"path": p, "function": fn, "line": line} for p, fn, line in where]


def stack(rank: int) -> list[dict]:
    """Innermost first: rank 1 waits at line 20 of a helper, the others at line 22; the helper is
    called through a verl-style wrapper from `init_model`, itself under verl's dispatch."""
    return frames(
        ("/usr/lib/python3.11/threading.py", "wait", 331),
        ("/usr/lib/python3.11/threading.py", "wait", 629),
        (ROLES, "helper", 20 if rank == 1 else 22),
        (DECO, "inner", 431),
        (ROLES, "init_model", 40),
        *VERL,
        *EXECUTOR,
    )


def row(rank: int) -> dict:
    thread = {"name": "MainThread", "id": 1, "main": True, "frames": stack(rank)}
    return {"worker": f"w{rank}", "rank": rank, "job_id": "01", "threads": [thread]}


def nodes(tree: dict):
    yield tree
    for c in tree["children"]:
        yield from nodes(c)


def test_the_rule_marks_frameworks_and_keeps_the_users_code():
    for path in (
        TQ,
        DECO,
        VERL_RAY,
        RAYLET,
        SP + "ray/_private/worker.py",
        "/usr/lib/python3.11/functools.py",
    ):
        assert lib.is_library(path, frozenset()), path
    for path in (
        "/home/u/src/verl/verl/single_controller/base/decorator.py",  # verl from a git clone (-e)
        "/home/u/ray/python/ray/actor.py",  # Ray from a source checkout
        SP + "torch/distributed/c10d_logger.py",
        "<frozen runpy>",
        "",
        None,
    ):
        assert lib.is_library(path, frozenset()), path
    for path in (
        ROLES,
        "/tmp/ray/session_1/runtime_resources/working_dir_files/_ray_pkg_ab/train.py",  # working_dir
        "/home/u/mypkg/src/mypkg/model.py",  # an editable install of the user's package
        "/home/u/myray/util/x.py",  # a segment, not a substring
    ):
        assert not lib.is_library(path, frozenset()), path
    # A package of the user's installed into site-packages, declared theirs.
    mine = SP + "mypkg/model.py"
    assert lib.is_library(mine, frozenset())
    assert lib.user_packages({lib.USER_PACKAGES_ENV: "mypkg, other,bad-name"}) == {"mypkg", "other"}
    assert not lib.is_library(mine, frozenset({"mypkg"}))
    assert lib.is_library(RAYLET, frozenset({"ray"})), "a Cython frame never has a source"
    assert not lib.has_source(RAYLET) and lib.has_source(ROLES)


def test_the_tree_forks_on_the_users_frame_not_on_verls_wrapper():
    tree = job_tree([row(r) for r in range(3)], "01")
    parts = [n for n in nodes(tree) if n["branch"]]
    assert [(n["function"], n["path"], n["line"], n["library"]) for n in parts] == [
        ("init_model", ROLES, 40, False)
    ], "ranks part at the user's frame that called the wrapper"
    assert [f["function"] for f in tree["via"]][-3:] == ["func", "inner", "inner"], "verl's way in, kept"
    assert all(not n["library"] for n in nodes(tree) if n["children"]), "a library frame is never a fork"
    helper = tree["children"][0]
    assert (helper["function"], helper["line"], helper["ranks"]) == ("helper", 22, [0, 2])
    assert [(f["path"], f["function"]) for f in helper["via"]] == [(DECO, "inner")]
    leaf = helper["children"][0]
    assert leaf["library"] and [f["line"] for f in leaf["frames"]] == [629, 331] and leaf["ranks"] == [0, 2]
    text = format_tree(tree)
    assert text[0] == "init_model roles.py:40  ranks 0-2 (3)  (via 9 library frames)  <- ranks part here"
    assert "    wait threading.py:629  ranks 0,2 (2)  [2 library frames]" in text
    assert not any("decorator.py" in line for line in text)
    full = format_tree(tree, all_frames=True)
    assert (
        "inner transferqueue_utils.py:378  (library)" in full
        and "execute_task _raylet.pyx:1811  (library)" in full
    )
    assert "init_model roles.py:40  ranks 0-2 (3)  <- ranks part here" in full
    assert format_trees({"tree": [dict(tree, job_id="01")]}, all_frames=True).count("(library)") > 9


def test_stacks_text_folds_library_runs_unless_all_frames():
    rows = [
        {**r, "threads": [dict(t, frames=lib.mark(t["frames"])) for t in r["threads"]]}
        for r in map(row, range(3))
    ]
    assert all(f["library"] == lib.is_library(f["path"]) for f in rows[0]["threads"][0]["frames"])
    result = {"workers": rows, "groups": group_stacks(rows)}
    text = format_text(result)
    assert "      wait  /usr/lib/python3.11/threading.py:331" in text, "where it stands stays"
    assert "      … 9 library frames: inner, inner, func, _resume_span, …" in text
    assert "      inner  " + DECO + ":431" in text, "a single wrapper between two user frames stays"
    assert "_raylet.pyx" not in text and "transferqueue_utils" not in text
    full = format_text(result, all_frames=True)
    assert f"      execute_task  {RAYLET}:1811" in full and f"      inner  {TQ}:378" in full
    assert summary(rows[0]["threads"][0]["frames"]) == "wait ← helper roles.py:22 ← init_model roles.py:40"
    args = argparse.Namespace(tree=True, all_frames=True)
    assert query_path(args) == "/v1/stacks?tree=1&all_frames=1"


def test_the_dap_stack_dims_every_library_frame_and_names_no_made_up_source():
    cwd = "/tmp/ray/session_1/runtime_resources/working_dir_files/_ray_pkg_ab"
    body = {
        "stackFrames": [
            {"id": 1, "name": "helper", "line": 20, "source": {"path": ROLES}},
            {"id": 2, "name": "inner", "line": 431, "source": {"path": DECO, "name": "decorator.py"}},
            {"id": 3, "name": "init_model", "line": 40, "source": {"path": ROLES}},
            {"id": 4, "name": "inner", "line": 378, "source": {"path": TQ}},
            {  # pydevd's absolute form of Cython's relative path, and its decompiled source
                "id": 5,
                "name": "execute_task",
                "line": 1811,
                "source": {"path": f"{cwd}/{RAYLET}", "name": "_raylet.pyx", "sourceReference": 7},
            },
        ]
    }
    out = tidy("stackTrace", body)["stackFrames"]
    assert [f.get("presentationHint") for f in out] == [None, "subtle", None, "subtle", "subtle"]
    assert out[1]["source"] == {"path": DECO, "name": "decorator.py", "presentationHint": "deemphasize"}
    assert out[4]["source"] == {
        "name": "_raylet.pyx",
        "presentationHint": "deemphasize",
        "origin": NO_SOURCE_ORIGIN,
    }
    assert out[0] == body["stackFrames"][0]
    held = {"id": 6, "name": "<module>", "line": 1, "source": {"name": "<string>", "sourceReference": 3}}
    kept = tidy("stackTrace", {"stackFrames": [held]})["stackFrames"][0]
    assert kept["presentationHint"] == "subtle" and kept["source"]["sourceReference"] == 3, (
        "a <string> keeps its text"
    )
    # A raise inside a library: the stop is placed at the user's line that called it.
    inside = [{"id": 9, "name": "all_reduce", "line": 5, "source": {"path": SP + "torch/distributed/x.py"}}]
    assert (
        user_top(tidy("stackTrace", {"stackFrames": inside + body["stackFrames"]})["stackFrames"])["id"] == 1
    )
    assert user_top(tidy("stackTrace", {"stackFrames": inside})["stackFrames"])["id"] == 9
    assert user_top([]) is None


def test_a_crash_record_marks_its_frames_and_its_top_is_the_users():
    entries = lib.mark(
        frames((SP + "torch/distributed/distributed_c10d.py", "all_reduce", 9), (ROLES, "f", 3), *VERL)
    )
    assert [f["library"] for f in entries] == [True, False, True, True, True]
    assert lib.top_user(entries)["path"] == ROLES
    assert lib.top_user(lib.mark(frames(*VERL)))["path"] == TQ, "all library: the innermost"
    assert lib.top_user([]) is None


def test_debugpy_is_given_a_traceback_that_ends_on_the_users_line():
    """A raise inside a framework (code compiled under a site-packages path): the traceback the
    hold gives debugpy ends at the user's frame; the exception keeps its own whole traceback."""
    import sys

    from raysleuth.agent.postmortem import at_user_frame

    ns: dict = {}
    code = "def check(v):\n    if v <= 0:\n        raise ValueError(v)\n    return v\n"
    exec(compile(code, SP + "fakefw/__init__.py", "exec"), ns)

    def user_update(lr):
        return ns["check"](lr * 10)

    try:
        user_update(-1.0)
    except ValueError:
        info = sys.exc_info()

    def names(tb):
        out = []
        while tb is not None:
            out.append(tb.tb_frame.f_code.co_name)
            tb = tb.tb_next
        return out

    cut = at_user_frame(info)
    assert names(info[2])[-2:] == ["user_update", "check"]
    assert names(cut[2])[-1] == "user_update" and cut[:2] == info[:2]
    assert names(info[1].__traceback__)[-1] == "check", "the exception's own traceback is whole"
    assert at_user_frame(cut) == cut, "the user's frame innermost already: unchanged"
    bare = (ValueError, ValueError(), None)
    assert at_user_frame(bare) is bare, "no traceback: as it is"


def test_all_frames_is_0_or_1_else_a_400():
    import pytest

    from raysleuth.broker.radar.stacks import StacksQuery
    from raysleuth.shared.errors import BadRequest

    assert StacksQuery.from_params({"all_frames": "1"}).all_frames
    assert not StacksQuery.from_params({}).all_frames
    with pytest.raises(BadRequest) as bad:
        StacksQuery.from_params({"all_frames": "yes please"})
    assert "all_frames" in bad.value.message and bad.value.hint
