"""Rank scopes in a DAP client's setBreakpoints: stripped for debugpy, out-of-scope ones held back."""

from raysleuth.broker.debug.dap_scopes import merge_scoped, scope_breakpoints

RANK1 = {"rank": 1, "actor_class": "Trainer", "node_id": "abc123"}


def test_scope_is_stripped_and_other_ranks_are_held_back():
    args = {
        "source": {"path": "/x/job.py"},
        "breakpoints": [
            {"line": 3, "condition": "[rank 1] step > 2"},
            {"line": 4, "condition": "[rank 0]"},
            {"line": 5},
            {"line": 6, "condition": "[actor Trainer]"},
        ],
        "lines": [3, 4, 5, 6],
    }
    sent, kept = scope_breakpoints(args, RANK1)
    assert sent["breakpoints"] == [{"line": 3, "condition": "step > 2"}, {"line": 5}, {"line": 6}]
    assert "lines" not in sent and sent["source"] == args["source"]
    assert kept[0] is None and kept[2] is None and kept[3] is None
    assert kept[1]["verified"] is False and "rank 0" in kept[1]["message"]
    answered = [
        {"id": 1, "verified": True, "line": 3},
        {"id": 2, "verified": True, "line": 5},
        {"id": 3, "verified": True, "line": 6},
    ]
    merged = merge_scoped(kept, answered)
    assert [b.get("line") for b in merged] == [3, 4, 5, 6]
    assert [b["verified"] for b in merged] == [True, False, True, True]


def test_a_bad_scope_is_answered_unverified_with_the_reason():
    sent, kept = scope_breakpoints({"breakpoints": [{"line": 2, "condition": "[team 3] x"}]}, RANK1)
    assert sent["breakpoints"] == [] and "unknown scope" in kept[0]["message"]


def test_unknown_rank_keeps_the_breakpoint():
    sent, _ = scope_breakpoints({"breakpoints": [{"line": 2, "condition": "[rank 4]"}]}, {"rank": None})
    assert sent["breakpoints"] == [{"line": 2}]
