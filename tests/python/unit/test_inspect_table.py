"""The cross-rank table: flags by hash and by rtol (raysleuth/model/compare.py), the broker's
store of inspect rows (broker/points/inspect.py), snapshot expressions from the request to the agent's
values and back flagged, and tensor-aware text in the agent's reprs."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from raysleuth.agent.capture import bounded_repr
from raysleuth.agent.hits import expression_values, format_log
from raysleuth.agent.points import ArmedPoint
from raysleuth.broker.events import EventHub
from raysleuth.broker.points.inspect import Inspections, flag_snapshot_rows, rtol_of
from raysleuth.broker.points.service import PointSet
from raysleuth.broker.workers.inbox import Inbox
from raysleuth.model.compare import flag_group
from raysleuth.model.tensors import summarize, summary
from raysleuth.shared.errors import BadRequest


def grads(perturb: dict[int, float], n: int = 4) -> list[dict]:
    base = np.linspace(-1, 1, 1000, dtype=np.float32)
    out = []
    for rank in range(n):
        g = base.copy()
        g[7] += perturb.get(rank, 0.0)
        out.append(dict(summary(g), rank=rank))
    return out


def flagged(rows) -> list[int]:
    return [r["rank"] for r in rows if r["differs"]]


def test_the_rank_whose_hash_differs_from_the_majority_is_flagged():
    rows = grads({2: 1e-3})
    flag_group(rows)
    assert flagged(rows) == [2]
    assert "hash" in rows[2]["why"] and rows[0]["why"] is None


def test_equal_ranks_are_not_flagged_and_one_rank_alone_never_is():
    rows = grads({})
    flag_group(rows)
    assert flagged(rows) == []
    one = grads({}, n=1)
    flag_group(one)
    assert flagged(one) == []


def test_without_a_majority_hash_the_rtol_on_norm_and_mean_decides():
    # every rank holds other data (no two hashes agree): only the one far off the median is flagged
    rows = grads({0: 1e-4, 1: 2e-4, 2: 1e-1, 3: 3e-4})
    flag_group(rows, rtol=1e-5)
    assert flagged(rows) == [2] and "relative" in rows[2]["why"]
    flag_group(rows, rtol=1.0)
    assert flagged(rows) == []
    flag_group(rows, rtol=0.0)
    assert len(flagged(rows)) >= 3


def test_a_rank_whose_tensor_sits_on_another_kind_of_device_is_told_so():
    rows = [dict(r, device=f"cuda:{r['rank']}", hash="0f" * 8) for r in grads({})]
    flag_group(rows)
    assert flagged(rows) == []  # each rank on its own GPU: the same kind of device
    rows[1].update(device="cpu", hash=grads({})[1]["hash"])  # the same bits, in host memory
    flag_group(rows)
    assert flagged(rows) == [1] and rows[1]["why"].startswith("device cpu, the majority on cuda")


def test_shape_mismatch_and_value_texts_are_flagged():
    rows = [dict(summary(np.ones(4)), rank=r) for r in range(3)] + [dict(summary(np.ones(5)), rank=3)]
    flag_group(rows)
    assert flagged(rows) == [3] and "shape" in rows[3]["why"]
    texts = [{"rank": r, "value": "'a'" if r != 1 else "'b'"} for r in range(3)]
    flag_group(texts)
    assert flagged(texts) == [1]


def inspect_event(rank, step, value, name="grad"):
    return {
        "t": 1.0,
        "name": "inspect",
        "fields": {"name": name, "step": step, "rank": rank, "rows": summarize(name, value)},
    }


def test_inspections_keep_rows_per_step_and_serve_the_latest_flagged():
    store = Inspections(EventHub())
    base = np.arange(10, dtype=np.float32)
    for step in (0, 1):
        for rank in range(4):
            v = base + (1e-3 if rank == 2 and step == 1 else 0)
            store.add({"rank": rank, "worker": f"w{rank}", "pid": 100 + rank}, inspect_event(rank, step, v))
    latest = store.query("grad")
    assert [(r["rank"], r["step"], r["differs"]) for r in latest] == [
        (0, 1, False),
        (1, 1, False),
        (2, 1, True),
        (3, 1, False),
    ]
    assert flagged(store.query("grad", "0")) == []
    assert len(store.query("grad", "all")) == 8
    assert store.query("nothing") == []
    assert store.names()[0]["name"] == "grad" and store.names()[0]["last_step"] == 1


def test_a_collection_is_queried_whole_or_by_entry():
    store = Inspections()
    for rank in range(3):
        sd = {"w": np.ones(3) * (2 if rank == 1 else 1), "b": np.zeros(2)}
        store.add({"rank": rank, "worker": f"w{rank}"}, inspect_event(rank, 5, sd, name="model"))
    rows = store.query("model")
    assert sorted({r["name"] for r in rows}) == ["model.b", "model.w"]
    w = store.query("model.w")
    assert [r["rank"] for r in w] == [0, 1, 2] and flagged(w) == [1]


def test_the_inbox_puts_inspect_rows_in_the_store_and_a_light_event_on_the_timeline():
    class Timeline:
        events: list = []

        def add_event(self, who, name, t, fields):
            self.events.append((name, fields))

    class Table:
        def get(self, wid):
            return None

    tl, store = Timeline(), Inspections()
    inbox = Inbox(Table(), tl, None, None, EventHub(), store)
    inbox.route({"worker": "w0", "kind": "events", "data": {"rank": 0, "items": [inspect_event(0, 3, 1.5)]}})
    assert tl.events == [("inspect", {"name": "grad", "step": 3, "entries": 1})]
    assert store.query("grad")[0]["mean"] == 1.5


def test_rtol_must_be_a_number():
    assert rtol_of({}) == 1e-5 and rtol_of({"rtol": "1e-3"}) == 1e-3
    with pytest.raises(BadRequest):
        rtol_of({"rtol": "tight"})
    with pytest.raises(BadRequest):
        rtol_of({"rtol": "-1"})


def test_snapshot_expressions_are_checked_kept_and_sent_to_the_agents(tmp_path):
    points = PointSet(tmp_path)
    snap = points.add_snapshot({"path": "/w/train.py", "line": 9, "expressions": ["self.w.grad", "loss"]})
    assert snap.to_json()["expressions"] == ["self.w.grad", "loss"]
    [spec] = points.specs()
    assert ArmedPoint.from_spec(spec).exprs[0][0] == "self.w.grad"
    for bad in (["x +"], [], "loss", [3]):
        with pytest.raises(BadRequest):
            points.add_snapshot({"path": "/w/train.py", "line": 9, "expressions": bad})


def test_expression_values_in_a_frame_and_the_rows_flagged_per_capture():
    def frame_with(grad):
        loss = 0.5  # noqa: F841 - read by the expressions
        name = "run"  # noqa: F841
        return sys._getframe()

    exprs = [(e, compile(e, "<e>", "eval")) for e in ("grad", "loss", "name", "1 / 0")]
    rows = []
    for rank in range(4):
        values = expression_values(exprs, frame_with(np.ones(8) * (1.001 if rank == 2 else 1)))
        rows.append({"rank": rank, "worker": f"w{rank}", "frames": [], "values": values})
    assert [v["name"] for v in rows[0]["values"]] == ["grad", "loss", "name", "1 / 0"]
    assert rows[0]["values"][2]["value"] == "'run'" and "ZeroDivisionError" in rows[0]["values"][3]["error"]
    out = flag_snapshot_rows(rows)
    assert [r["differs"] for r in out] == [False, False, True, False]
    assert [v["name"] for v in out[2]["values"] if v["differs"]] == ["grad"]
    assert "differs" not in rows[0]  # the stored rows stay as they were


def test_logpoints_and_reprs_show_an_array_by_its_summary():
    frame = (lambda t: sys._getframe())(np.zeros((2, 3), dtype=np.float32))
    assert format_log("t={t}", frame) == "t=ndarray[2, 3] float32 norm=0.0e+00 nan=0"
    assert bounded_repr({"w": np.ones(2)}) == "{'w': ndarray[2] float64 norm=1.4e+00 nan=0}"
    assert bounded_repr(list(range(3))) == "[0, 1, 2]"


def test_the_cli_table_marks_the_rank_that_differs_and_says_why():
    from raysleuth.cli.inspect import format_table

    rows = grads({2: 1e-3})
    for r in rows:
        r.update(name="grad", step=4)
    flag_group(rows)
    text = format_table(rows)
    lines = text.splitlines()
    assert lines[0].split()[:4] == ["NAME", "STEP", "RANK", "SHAPE"]
    marked = [ln for ln in lines[1:5] if ln.startswith("!")]
    assert len(marked) == 1 and marked[0].split()[3] == "2"
    assert "rank 2 grad step 4: hash differs" in text
    assert "No inspect rows yet" in format_table([])


def test_the_outbox_sends_an_inspects_rows_and_keeps_a_light_copy_for_crash_records():
    import threading

    from raysleuth.agent.outbox import Outbox
    from raysleuth.agent.registry import RegistryLink

    calls = []

    class Registry:
        class emit:  # noqa: N801 - a Ray actor method's shape: .remote(...)
            @staticmethod
            def remote(*args):
                calls.append(args)

    link = RegistryLink(lambda: None, lambda: "Agent[test]")
    link.handle = Registry()
    box = Outbox(link, lambda: "w1", threading.Event())
    rows = summarize("grad", np.ones(3))
    box.record_event(
        {"t": 1.0, "name": "inspect", "fields": {"rows": rows}}, False, keep={"t": 1.0, "name": "inspect"}
    )
    assert list(box.recent) == [{"t": 1.0, "name": "inspect"}]
    box.flush_events()
    [(wid, kind, payload)] = calls
    assert (wid, kind) == ("w1", "events") and payload["items"][0]["fields"]["rows"] == rows


def test_inspect_outside_ray_does_nothing_and_never_raises():
    import raysleuth

    class Exploding:
        def __iter__(self):
            raise RuntimeError("must not be walked without an agent")

    assert raysleuth.inspect("x", Exploding()) is None
