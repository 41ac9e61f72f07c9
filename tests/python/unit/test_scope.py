"""Rank scopes in breakpoint conditions, as the contract writes them.

The cases shared with the extension's parser live in tests/scope_cases.json.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raysleuth.model.scope import Scope, format_ranks, parse_ranks, split_condition, with_ranks
from raysleuth.shared.errors import BadRequest

CASES = json.loads((Path(__file__).resolve().parents[2] / "scope_cases.json").read_text())["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["condition"] or "(empty)" for c in CASES])
def test_shared_scope_case(case):
    if "error" in case:
        with pytest.raises(BadRequest) as err:
            split_condition(case["condition"])
        assert case["error"] in err.value.message and err.value.hint
        return
    scope, rest = split_condition(case["condition"])
    assert (sorted(scope.ranks) if scope.ranks is not None else None) == case["ranks"]
    assert list(scope.nodes) == case["nodes"] and list(scope.actors) == case["actors"]
    assert list(scope.groups) == case.get("groups", [])
    assert list(scope.roles) == case.get("roles", [])
    assert rest == case["rest"]
    assert scope.text() == case["text"]


def test_the_shared_table_has_cases():
    assert len(CASES) >= 10 and any("error" in c for c in CASES)


def test_rank_lists_and_ranges():
    assert parse_ranks("0,2-3") == {0, 2, 3}
    assert parse_ranks(" 5 ") == {5}
    assert format_ranks({0, 2, 3, 7}) == "0,2-3,7"


@pytest.mark.parametrize("bad", ["x", "3-1", "-2", ",", "1-"])
def test_bad_rank_lists_say_how(bad):
    with pytest.raises(BadRequest) as err:
        parse_ranks(bad)
    assert err.value.hint


def test_split_condition_takes_scopes_off_the_front():
    scope, rest = split_condition("[rank 0,2-3] step % 100 == 0")
    assert scope.ranks == {0, 2, 3} and rest == "step % 100 == 0"
    scope, rest = split_condition("[node 3f2a][actor Learner] x > 1")
    assert scope.nodes == ("3f2a",) and scope.actors == ("Learner",) and rest == "x > 1"
    scope, rest = split_condition("[rank 1]")
    assert scope.ranks == {1} and rest is None
    scope, rest = split_condition("a[0] == 1")  # brackets later in a condition are Python
    assert scope.is_all() and rest == "a[0] == 1"
    assert split_condition(None) == (Scope(), None)


def test_unknown_scope_is_a_bad_request():
    with pytest.raises(BadRequest) as err:
        split_condition("[team 1] x")
    assert "unknown scope" in err.value.message


def test_matching_a_worker():
    w = {"rank": 2, "node_id": "3f2aabc", "node_ip": "10.0.0.5", "actor_class": "Learner", "actor_name": None}
    assert split_condition("[rank 0,2]")[0].match(w) is True
    assert split_condition("[rank 1]")[0].match(w) is False
    assert split_condition("[node 3f2a]")[0].match(w) is True
    assert split_condition("[node 10.0.0.5]")[0].match(w) is True
    assert split_condition("[node beef]")[0].match(w) is False
    assert split_condition("[actor Learner]")[0].match(w) is True
    assert split_condition("[actor Critic]")[0].match(w) is False
    # A rank not known yet could still match: armed until the rank rules it out.
    assert split_condition("[rank 1]")[0].match(dict(w, rank=None)) is None


def test_ranks_field_narrows_the_scope():
    scope, _ = split_condition("[rank 0-3]")
    assert with_ranks(scope, [1, 3, 9]).ranks == {1, 3}
    assert with_ranks(Scope(), [4]).ranks == {4}
    assert with_ranks(scope, None) is scope
    with pytest.raises(BadRequest):
        with_ranks(scope, ["a"])


def test_scope_text_and_json_round_trip():
    scope, _ = split_condition("[rank 0,2-3][node ab]")
    assert scope.text() == "rank 0,2-3; node ab"
    assert Scope.from_json(scope.to_json()) == scope
    assert Scope().text() is None


def test_first_rank_stops_rank_0_of_each_job_and_workers_without_a_rank():
    """Issue 25 item 7: a plain editor breakpoint in a 64-rank job stops one rank, not 64."""
    first = Scope(first=True)
    assert not first.is_all() and first.text() == "first rank"
    assert [first.match({"rank": r}) for r in (0, 1, 63)] == [True, False, False]
    assert first.match({"rank": None}) is True  # a plain task (prefetch_batch) stops as usual
    assert Scope.from_json(first.to_json()) == first
    assert Scope.from_json({"ranks": None, "nodes": [], "actors": []}) == Scope()  # an older spec


def test_first_rank_in_a_put_and_where_it_does_not_apply():
    from raysleuth.model.point import Point

    plain = Point.parse_breakpoint("/a.py", {"line": 3})
    first = Point.parse_breakpoint("/a.py", {"line": 3, "firstRank": True})
    assert first.scope.first and first.to_json()["scope"] == "first rank" and first.id != plain.id
    assert Point.parse_breakpoint("/a.py", {"line": 3, "firstRank": False}).id == plain.id
    # A rank scope, or the request's ranks, is the user's word; a logpoint logs on every rank.
    scoped = Point.parse_breakpoint("/a.py", {"line": 3, "condition": "[rank 2]", "firstRank": True})
    assert not scoped.scope.first and scoped.scope.ranks == {2}
    assert not Point.parse_breakpoint("/a.py", {"line": 3, "ranks": [1], "firstRank": True}).scope.first
    assert not Point.parse_breakpoint("/a.py", {"line": 3, "logMessage": "x", "firstRank": True}).scope.first
    with pytest.raises(BadRequest, match="firstRank"):
        Point.parse_breakpoint("/a.py", {"line": 3, "firstRank": "yes"})
