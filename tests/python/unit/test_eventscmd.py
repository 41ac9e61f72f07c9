"""`raysleuth events`: the table and the Trace Event export (one row per rank, ordered by time)."""

from __future__ import annotations

from raysleuth.cli.events import format_list, to_trace


def ev(seq, t, name, rank=None, pid=10, **fields):
    who = {"rank": rank, "worker": f"w{pid}", "pid": pid}
    return {"seq": seq, "time": t, "name": name, **who, "fields": fields}


def test_trace_has_a_named_row_per_rank_and_instant_events_in_time_order():
    events = [ev(2, 2.5, "step", rank=1, step=0), ev(1, 1.0, "step", rank=0, step=0)]
    events.append(ev(3, 3.0, "crash", pid=77))
    trace = to_trace(events)["traceEvents"]
    meta = [(t["tid"], t["args"]["name"]) for t in trace if t["ph"] == "M"]
    assert meta == [(0, "rank 0"), (1, "rank 1"), (100_002, "pid 77")]
    inst = [t for t in trace if t["ph"] == "i"]
    assert [(t["name"], t["tid"], t["ts"]) for t in inst] == [
        ("step", 0, 1_000_000),
        ("step", 1, 2_500_000),
        ("crash", 100_002, 3_000_000),
    ]
    assert inst[0]["args"] == {"step": 0, "seq": 1, "worker": "w10"} and inst[0]["s"] == "t"


def test_the_table_is_by_time_and_says_how_to_add_events_when_empty():
    out = format_list([ev(2, 2.0, "step", rank=1, loss=0.5), ev(1, 1.0, "start", rank=0)])
    lines = out.splitlines()
    assert lines[0].split() == ["SEQ", "TIME", "WHO", "NAME", "FIELDS"]
    assert "start" in lines[1] and "rank 0" in lines[1]
    assert lines[2].rstrip().endswith("loss=0.5") and "rank 1" in lines[2]
    assert "raysleuth.event(" in format_list([])
