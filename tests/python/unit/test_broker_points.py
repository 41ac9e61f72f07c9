"""The cluster point set and its publishing: owners, listings, persistence, agent specs."""

from __future__ import annotations

import json
import types

import pytest
from broker_fakes import FakeAgents

from raysleuth.broker.events import EventHub
from raysleuth.broker.points.service import PointService, PointSet
from raysleuth.cli import breaks as breakcmd
from raysleuth.model.point import Point
from raysleuth.shared.errors import BadRequest, NotFound

F = "/work/train.py"


def service(tmp_path, reports=(), live=()):
    agents = FakeAgents()
    hub = EventHub()
    svc = PointService(PointSet(tmp_path), agents, hub, lambda: list(reports), lambda: set(live))
    return svc, agents, hub


async def test_an_owner_replaces_only_its_own_points_in_a_file(tmp_path):
    svc, agents, _ = service(tmp_path)
    await svc.put_file(
        {"path": F, "owner": "cli", "breakpoints": [{"line": 7, "condition": "[rank 0] x > 1"}]}
    )
    await svc.put_file({"path": F, "owner": "vscode:w1", "breakpoints": [{"line": 3}, {"line": 9}]})
    await svc.put_file({"path": F, "owner": "vscode:w1", "breakpoints": [{"line": 9}]})
    listing = svc.breakpoint_listing()
    assert [(b["line"], b["owner"]) for b in listing] == [(7, "cli"), (9, "vscode:w1")]
    await svc.put_file({"path": F, "owner": "vscode:w1", "breakpoints": []})
    assert [(b["line"], b["owner"], b["scope"]) for b in svc.breakpoint_listing()] == [(7, "cli", "rank 0")]
    # every change went to the agents as the whole set, scope parsed, condition's Python part apart
    [spec] = agents.point_sets[-1]
    assert spec["rest"] == "x > 1" and spec["condition"] == "[rank 0] x > 1" and spec["scope"]["ranks"] == [0]


async def test_no_owner_means_api_and_clearing_one_owner_keeps_the_others(tmp_path):
    svc, _, _ = service(tmp_path)
    await svc.put_file({"path": F, "breakpoints": [{"line": 1}]})
    await svc.put_file({"path": F, "owner": "cli", "breakpoints": [{"line": 2}]})
    assert {b["owner"] for b in svc.breakpoint_listing()} == {"api", "cli"}
    assert await svc.clear("cli") == 1
    assert [b["owner"] for b in svc.breakpoint_listing()] == ["api"]
    assert await svc.clear(None) == 1 and svc.breakpoint_listing() == []


@pytest.mark.parametrize(
    "body, words",
    [
        ({"path": "rel.py", "breakpoints": []}, "absolute"),
        ({"path": F, "breakpoints": {}}, "must be a list"),
        ({"path": F, "breakpoints": [{"line": 0}]}, "positive integer"),
        ({"path": F, "breakpoints": [{"line": 2, "hitCondition": "often"}]}, "hitCondition"),
        ({"path": F, "breakpoints": [{"line": 2, "condition": "[rank 1] x >"}]}, "not a Python expression"),
        ({"path": F, "owner": "x" * 100, "breakpoints": []}, "owner"),
        ({"path": F, "owner": 5, "breakpoints": []}, "owner"),
        ({"path": F, "breakpoints": [{"line": 2, "ranks": [float("inf")]}]}, "not a list of ranks"),
        ({"path": F, "breakpoints": [{"line": 2, "ranks": [1.5]}]}, "not a list of ranks"),
        ({"path": F, "breakpoints": [{"line": 2, "ranks": "03"}]}, "not a list of ranks"),
        ({"path": F, "breakpoints": [{"line": 2, "ranks": [True]}]}, "not a list of ranks"),
        ({"path": F, "breakpoints": [{"line": 2, "ranks": [-1]}]}, "not a list of ranks"),
    ],
)
async def test_bad_input_is_a_bad_request_with_a_hint_and_changes_nothing(tmp_path, body, words):
    svc, agents, _ = service(tmp_path)
    await svc.put_file({"path": F, "breakpoints": [{"line": 5}]})
    with pytest.raises(BadRequest) as err:
        await svc.put_file(body)
    assert words in err.value.message and err.value.hint
    assert [b["line"] for b in svc.breakpoint_listing()] == [5] and len(agents.point_sets) == 1


async def test_the_set_survives_a_restart_with_its_owners(tmp_path):
    svc, _, _ = service(tmp_path)
    await svc.put_file({"path": F, "owner": "cli", "breakpoints": [{"line": 4, "logMessage": "s={step}"}]})
    again = PointSet(tmp_path)
    [p] = again.breakpoints()
    assert (p.owner, p.kind, p.line, p.log_message) == ("cli", "log", 4, "s={step}")


def test_a_set_saved_by_the_first_format_loads_as_owned_by_api(tmp_path):
    old = {
        "files": {F: [{"id": "bp-1", "path": F, "line": 3, "condition": "[rank 2] y", "hitCondition": "%2"}]}
    }
    (tmp_path / "breakpoints.json").write_text(json.dumps(old))
    [p] = PointSet(tmp_path).breakpoints()
    assert (p.owner, p.line, p.rest, sorted(p.scope.ranks), p.hit(4)) == ("api", 3, "y", [2], True)


async def test_armed_counts_come_from_live_workers_reports(tmp_path):
    reports = []
    svc, _, hub = service(tmp_path, reports=reports, live={"w1", "w2"})
    res = await svc.put_file({"path": F, "breakpoints": [{"line": 5}]})
    pid = res["breakpoints"][0]["id"]
    reports += [
        {"id": "w1", "armed": [pid], "rank": 1, "pid": 11},
        {"id": "w2", "armed": [pid], "goodbye": "x"},
        {"id": "w3", "armed": [pid]},
    ]
    q = hub.subscribe()
    svc.publish_listing()
    listed = svc.breakpoint_listing()[0]
    assert listed["armed"] == 1 and listed["armed_on"] == [{"worker": "w1", "rank": 1, "pid": 11}]
    assert b'"armed":1' in q.get_nowait()
    svc.publish_listing()  # unchanged: no second event
    assert q.empty()


async def test_pending_counts_live_workers_that_have_not_taken_the_new_set(tmp_path):
    reports = []
    svc, agents, _ = service(tmp_path, reports=reports, live={"w1", "w2"})
    await svc.put_file({"path": F, "breakpoints": [{"line": 5}]})
    reports += [
        {"id": "w1", "bp_version": agents.points_version},
        {"id": "w2", "bp_version": "older"},
        {"id": "w3", "bp_version": "older"},  # not live: not waited for
    ]
    assert svc.breakpoint_listing()[0]["pending"] == 1
    reports[1]["bp_version"] = agents.points_version
    assert svc.breakpoint_listing()[0]["pending"] == 0


async def test_snapshot_points_collect_rows_until_removed(tmp_path):
    svc, agents, _ = service(tmp_path)
    snap = await svc.add_snapshot({"path": F, "line": 8, "condition": "[rank 1]", "count": 2})
    assert agents.point_sets[-1][-1]["snapshot"] == snap.id
    assert svc.points.add_row(snap.id, {"rank": 1, "frames": []})
    [row] = svc.snapshot_listing()
    assert (row["rows"], row["ranks"], row["count"]) == (1, [1], 2)
    await svc.remove_snapshot(snap.id)
    assert not svc.points.add_row(snap.id, {})
    with pytest.raises(NotFound):
        svc.points.snapshot_rows(snap.id)


def test_point_specs_round_trip():
    p = Point.parse_breakpoint(
        F, {"line": 3, "condition": "[node ab][rank 1-2] a > b", "hitCondition": ">2"}, owner="o"
    )
    q = Point.from_spec(json.loads(json.dumps(p.to_spec())))
    assert q == p and q.hit(3) and not q.hit(2) and q.to_json(0)["scope"] == "rank 1-2; node ab"


class PointClient:
    """`raysleuth break`'s client, answered by a real PointSet (what the HTTP layer would do)."""

    def __init__(self, points: PointSet):
        self.points = points

    def breakpoints(self):
        return [dict(p.to_json(0), pending=0) for p in self.points.breakpoints()]

    def set_breakpoints(self, path, bps, root=None, owner=None):
        _, owner, mine = self.points.put_file(
            {"path": path, "breakpoints": bps, "root": root, "owner": owner}
        )
        return {"breakpoints": [dict(p.to_json(0), pending=0) for p in mine]}  # no worker to wait for

    def delete(self, path):
        owner = path.partition("owner=")[2] or None
        return {"ok": True, "deleted": self.points.clear(owner)}


def cli_args(**kw):
    base = dict(
        list=False, clear=False, all=False, location=None, remove=False, cond=None, ranks=None, hit=None
    )
    base.update(log=None, json=False, follow=False)
    base.update(kw)
    return types.SimpleNamespace(**base)


def test_a_breakpoint_from_the_terminal_survives_an_editor_edit_in_the_same_file(tmp_path, capsys):
    points = PointSet(tmp_path)
    client = PointClient(points)
    breakcmd.run_break(client, cli_args(location=f"{F}:12", ranks="0"))
    points.put_file({"path": F, "owner": "vscode:abc", "breakpoints": [{"line": 3}]})  # the editor mirror
    points.put_file({"path": F, "owner": "vscode:abc", "breakpoints": [{"line": 3}, {"line": 20}]})
    breakcmd.run_break(client, cli_args(location=f"{F}:14"))  # a second one from the terminal keeps the first
    assert [(b["line"], b["owner"]) for b in client.breakpoints()] == [
        (3, "vscode:abc"),
        (12, "cli"),
        (14, "cli"),
        (20, "vscode:abc"),
    ]
    breakcmd.run_break(client, cli_args(clear=True))
    assert "set from the terminal" in capsys.readouterr().out
    assert [b["owner"] for b in client.breakpoints()] == ["vscode:abc", "vscode:abc"]
    breakcmd.run_break(client, cli_args(clear=True, all=True))
    assert client.breakpoints() == []


def test_listing_from_the_terminal_names_other_owners(tmp_path):
    p = Point.parse_breakpoint(F, {"line": 3}, owner="vscode:abc").to_json(2)
    assert breakcmd.describe(p).endswith("(armed on 2, set by vscode:abc)")


def test_the_terminal_says_which_ranks_armed_a_point():
    p = dict(Point.parse_breakpoint(F, {"line": 3}, owner="cli").to_json(3))
    p["armed_on"] = [{"worker": "a", "rank": 1, "pid": 5}, {"worker": "b", "rank": 3, "pid": 6}]
    p["armed_on"].append({"worker": "c", "rank": None, "pid": 812})
    assert breakcmd.describe(p).endswith("(armed on 3: ranks 1,3, pid 812)")


def test_break_on_a_folder_or_past_the_end_is_refused_and_an_unarmed_point_says_why(tmp_path, capsys):
    client = PointClient(PointSet(tmp_path))
    job = tmp_path / "job.py"
    job.write_text("a = 1\nb = 2\n")
    with pytest.raises(BadRequest, match="is a folder, not a file"):
        breakcmd.run_break(client, cli_args(location=f"{tmp_path}:3"))
    with pytest.raises(BadRequest, match=r"Line 99999 is past the end of .*job.py \(2 lines\)"):
        breakcmd.run_break(client, cli_args(location=f"{job}:99999"))
    assert client.breakpoints() == []  # nothing was set
    breakcmd.run_break(client, cli_args(location=f"{job}:2"))
    assert "No worker has loaded" in capsys.readouterr().out
    breakcmd.run_break(client, cli_args(location="/not/here/job.py:4"))
    assert "is not on this host: the point arms in workers that load" in capsys.readouterr().out
