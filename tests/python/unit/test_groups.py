"""Rank groups (issue 27): made from ranks, worker ids or an expression over a worker's fields,
kept across a broker restart; a continue or pause names one; a group step names the ranks that
did not stop again (a rank waiting in a collective for one outside the group)."""

from __future__ import annotations

import asyncio

import pytest
from test_broker_control import setup, worker

from raysleuth.broker.groups.book import GroupBook
from raysleuth.model.groups import compile_expression, members, parse_group
from raysleuth.model.worker import Worker
from raysleuth.shared.errors import BadRequest, NotFound

W = [Worker(f"w{r}", pid=100 + r, rank=r, job_id="01", state="running", agent=True) for r in range(16)]


def test_a_group_by_expression_ranks_or_ids_has_its_live_members():
    assert [w.rank for w in members(parse_group("eighth", {"expression": "rank % 8 == 0"}), W)] == [0, 8]
    assert [w.rank for w in members(parse_group("two", {"ranks": [3, 5, 99]}), W)] == [3, 5]
    assert [w.id for w in members(parse_group("ids", {"workers": ["w3", "w15"]}), W)] == ["w3", "w15"]
    exited = [Worker("x", rank=0, job_id="01", state="exited")]
    assert members(parse_group("eighth", {"expression": "rank % 8 == 0"}), exited) == []


@pytest.mark.parametrize(
    "name, body, fragment",
    [
        ("all", {"ranks": [0]}, "built-in"),
        ("bad name!", {"ranks": [0]}, "not a name"),
        ("g", {}, "one of"),
        ("g", {"ranks": [0], "expression": "rank > 1"}, "one of"),
        ("g", {"expression": "__import__('os').system('id')"}, "not allowed"),
        ("g", {"expression": "secret == 1"}, "unknown field"),
        ("g", {"expression": "rank +"}, "not a Python expression"),
    ],
)
def test_bad_groups_are_refused_with_a_hint(name, body, fragment):
    with pytest.raises(BadRequest, match=fragment) as err:
        parse_group(name, body)
    assert err.value.hint


def test_groups_survive_a_restart_and_the_built_ins_are_listed(tmp_path):
    book = GroupBook(tmp_path, lambda: W)
    book.put("stragglers", {"ranks": [3, 7]})
    listed = {g["name"]: g for g in GroupBook(tmp_path, lambda: W).all()}  # a new broker, same dir
    assert listed["stragglers"]["ranks"] == [3, 7] and listed["stragglers"]["workers"] == ["w3", "w7"]
    assert listed["all"]["ranks"] == list(range(16)) and listed["job-01"]["job_id"] == "01"
    assert (tmp_path / "groups.json").stat().st_mode & 0o777 == 0o600
    book.delete("stragglers")
    with pytest.raises(NotFound):
        book.delete("stragglers")
    with pytest.raises(BadRequest, match="built-in"):
        book.delete("all")


async def test_pause_and_continue_by_group_touch_only_its_members(tmp_path):
    ws = [worker(f"w{r}", rank=r, state="running") for r in range(4)]
    control, leases, *_ = setup(ws)
    control.groups = GroupBook(tmp_path, control.table.workers)
    control.groups.put("odd", {"expression": "rank % 2 == 1"})
    res = await control.pause({"group": "odd"})
    assert sorted(res["paused"]) == ["w1", "w3"]
    with pytest.raises(NotFound, match="No group 'nope'"):
        await control.pause({"group": "nope"})


async def test_a_group_step_reports_a_rank_that_does_not_stop_again(tmp_path):
    ws = [worker(f"w{r}", rank=r, state="paused") for r in range(3)]
    control, leases, *_ = setup(ws)
    for w in ws:
        link = await leases.lease(w, None)
        link.stop(1)

    async def never(kind, tid, timeout):  # rank 2 enters an all_reduce a rank outside waits for
        await asyncio.sleep(0)
        return False

    leases.get("w2").step = never
    for wid in ("w0", "w1"):
        link = leases.get(wid)

        async def again(kind, tid, timeout, link=link):
            link.requests.append((kind, {"threadId": tid}))
            return True

        link.step = again
    res = await control.step({"ranks": [0, 1, 2], "kind": "next", "timeout": 0.5})
    assert [r["rank"] for r in res["stepped"]] == [0, 1] and res["skipped"] == []
    [late] = res["running"]
    assert late["rank"] == 2 and "did not stop again within 0.5 s" in late["reason"]
    assert ("next", {"threadId": 1}) in leases.get("w0").requests
    with pytest.raises(BadRequest, match="kind"):
        await control.step({"kind": "jump"})


def test_expressions_compile_once_checked():
    assert eval(
        compile_expression("rank >= 4 and node_ip == '10.0.0.5'"), {}, {"rank": 5, "node_ip": "10.0.0.5"}
    )


def test_a_group_scope_matches_the_groups_members_as_the_broker_resolved_them(tmp_path):
    """`[group NAME]` (issue 27): the broker refuses an unknown group, hands a known one out with
    its definition, and an agent matches its own identity against that definition."""
    from raysleuth.broker.points.service import PointSet
    from raysleuth.model.point import Point
    from raysleuth.model.scope import split_condition

    book = GroupBook(tmp_path, lambda: W)
    points = PointSet(tmp_path, book.definition)
    body = {
        "path": str(tmp_path / "train.py"),
        "breakpoints": [{"line": 3, "condition": "[group stragglers] x"}],
    }
    with pytest.raises(BadRequest, match="no rank group 'stragglers'") as err:
        points.put_file(body)
    assert "PUT /v1/groups/stragglers" in err.value.hint and points.breakpoints() == []

    book.put("stragglers", {"ranks": [3, 7], "job_id": "01"})
    book.put("eighth", {"expression": "rank % 8 == 0"})
    points.put_file(body)
    [spec] = points.specs()
    scope = Point.from_spec(spec).scope
    assert scope.text() == "group stragglers" and [d["ranks"] for d in scope.group_defs] == [[3, 7]]
    assert scope.match({"rank": 3, "job_id": "01"}) is True
    assert scope.match({"rank": 4, "job_id": "01"}) is False
    assert scope.match({"rank": 3, "job_id": "02"}) is False  # the group is of job 01
    assert scope.match({"rank": None, "job_id": "01"}) is None  # could still join once its rank shows

    eighth, _ = split_condition("[rank 0-8][group eighth]")
    resolved = eighth._replace(group_defs=(book.definition("eighth"),))
    assert [r for r in range(10) if resolved.match({"rank": r})] == [0, 8]
    assert resolved.match({"rank": None}) is None
    job, _ = split_condition("[group job-0a]")
    job = job._replace(group_defs=(book.definition("job-0a"),))
    assert job.match({"job_id": "0a", "rank": None}) is True and job.match({"job_id": "0b"}) is False
    ids, _ = split_condition("[group ids]")
    book.put("ids", {"workers": ["w1"]})
    ids = ids._replace(group_defs=(book.definition("ids"),))
    assert ids.match({"id": "w1abc"}) is True and ids.match({"id": "w2"}) is False

    book.delete("stragglers")  # a group deleted under a point arms it nowhere
    [spec] = points.specs()
    assert Point.from_spec(spec).scope.match({"rank": 3, "job_id": "01"}) is False
    assert spec["scope"]["group_defs"] == [{"name": "stragglers", "missing": True}]


def test_the_group_command_makes_lists_and_deletes_groups_and_the_points_follow(
    tmp_path, capsys, monkeypatch
):
    """`raysleuth group` over the broker's real HTTP app: a group changed from the terminal
    reaches the agents with a `[group NAME]` point at once (a new point set), and deleting it
    leaves the point armed nowhere."""
    from broker_fakes import FakeAgents, FakeTable
    from test_client_discovery import broker_app, state

    from raysleuth.broker.events import EventHub
    from raysleuth.broker.points.service import PointService, PointSet
    from raysleuth.cli import main

    monkeypatch.delenv("RAYSLEUTH_BROKER", raising=False)
    monkeypatch.delenv("RAYSLEUTH_TOKEN", raising=False)
    agents = FakeAgents()
    book = GroupBook(tmp_path, lambda: W)
    points = PointService(PointSet(tmp_path, book.definition), agents, EventHub(), list, set)
    with broker_app(table=FakeTable(W), groups=book, points=points) as url:
        opts = ["--state-dir", str(state(tmp_path, url))]
        assert main(["group", "stragglers", "--ranks", "3,7", "--job", "01", *opts]) == 0
        assert capsys.readouterr().out.splitlines()[1].split() == ["stragglers", "3,7", "2", "job", "01"]
        assert main(["break", f"{tmp_path}/train.py:3", "--group", "stragglers", "--if", "x", *opts]) == 0
        sets = len(agents.point_sets)
        assert main(["group", "stragglers", "--ranks", "3", *opts]) == 0
        assert len(agents.point_sets) == sets + 1
        assert agents.point_sets[-1][0]["scope"]["group_defs"][0]["ranks"] == [3]
        capsys.readouterr()
        assert main(["group", *opts]) == 0
        listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:]]
        assert listed == ["all", "job-01", "stragglers"]
        assert main(["group", "stragglers", "--delete", *opts]) == 0
        assert agents.point_sets[-1][0]["scope"]["group_defs"] == [{"name": "stragglers", "missing": True}]
        capsys.readouterr()
        assert main(["group", "nope", *opts]) == 2
        assert "no group 'nope'" in capsys.readouterr().err
        assert main(["group", "g", "--ranks", "1", "--expression", "rank > 1", *opts]) == 2
        assert "one of --ranks" in capsys.readouterr().err
