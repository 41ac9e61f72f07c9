"""The crash store (disk, retention, restart loops), hints, and the read-only replay's answers."""

from __future__ import annotations

import json

from raysleuth.broker.postmortem.crashes import CrashStore, hint_for
from raysleuth.broker.postmortem.replay import LOCALS_BASE, Replay
from raysleuth.model.crash import CrashRecord


def record(i: int, **kw) -> dict:
    rec = {
        "kind": "exception",
        "time": 1000.0 + i,
        "exc_type": "ValueError",
        "message": f"bad {i}",
        "worker": {"id": f"w{i}", "actor_id": kw.pop("actor", None), "pid": 10 + i},
        "frames": [{"path": "/x/job.py", "line": 7, "function": "f", "locals": {"a": "1"}}],
    }
    rec.update(kw)
    return rec


def test_records_persist_and_list_newest_first(tmp_path):
    store = CrashStore(tmp_path)
    ids = [store.add(record(i)).id for i in range(3)]
    files = sorted(p.name for p in (tmp_path / "crashes").glob("*.json"))
    assert len(files) == 3
    again = CrashStore(tmp_path)
    assert [c["id"] for c in again.summaries()] == ids[::-1]
    assert again.get(ids[0]).frames[0]["locals"] == {"a": "1"}


def test_retention_drops_the_oldest(tmp_path):
    store = CrashStore(tmp_path, keep=2)
    ids = [store.add(record(i)).id for i in range(4)]
    assert [c["id"] for c in store.summaries()] == [ids[3], ids[2]]
    assert len(list((tmp_path / "crashes").glob("*.json"))) == 2


def test_an_unreadable_file_is_skipped(tmp_path):
    (tmp_path / "crashes").mkdir()
    (tmp_path / "crashes" / "broken.json").write_text("{not json")
    (tmp_path / "crashes" / "ok.json").write_text(json.dumps(dict(record(1), id="ok")))
    assert [c["id"] for c in CrashStore(tmp_path).summaries()] == ["ok"]


def test_hints_follow_the_article_table(tmp_path):
    assert "CUDA" in hint_for(
        CrashRecord.from_json(
            {"kind": "exception", "exc_type": "torch.OutOfMemoryError", "message": "CUDA out of memory"}
        )
    )
    assert "serialized" in hint_for(
        CrashRecord.from_json({"kind": "exception", "exc_type": "_pickle.PicklingError", "message": "x"})
    )
    assert "firewall" in hint_for(
        CrashRecord.from_json({"kind": "exception", "exc_type": "ConnectionRefusedError", "message": ""})
    )
    assert "died" in hint_for(CrashRecord.from_json({"kind": "worker_died"}))
    check = {"check": "shared_lru.h:66: Check failed: value != nullptr", "file": "/x/w.err", "text": "..."}
    named = hint_for(CrashRecord.from_json({"kind": "worker_died", "ray_check": check}))
    assert "shared_lru.h:66: Check failed: value != nullptr" in named and "/x/w.err" in named
    assert "memory" in hint_for(CrashRecord.from_json({"kind": "oom"}))
    assert "faulthandler" in hint_for(CrashRecord.from_json({"kind": "segfault"}))
    store = CrashStore(tmp_path)
    for i in range(2):
        assert "restart loop" not in store.add(record(i, actor="A1")).hint
    assert "restart loop" in store.add(record(2, actor="A1")).hint


def test_replay_serves_the_stored_stack_and_refuses_to_run(tmp_path):
    rec = CrashRecord.from_json(
        dict(
            record(1, traceback="Traceback ...ValueError: bad 1"),
            id="c1",
            sources={"/gone/job.py": "x = 1\n"},
            frames=[
                {"path": "/gone/job.py", "line": 1, "function": "inner", "locals": {"x": "1"}},
                {"path": "/gone/job.py", "line": 1, "function": "outer", "locals": {}},
            ],
        )
    )
    r = Replay(rec)
    assert r.stopped_event()["reason"] == "exception"
    frames, _ = r.answer("stackTrace", {"threadId": 1})
    top = frames["stackFrames"][0]
    assert top["name"] == "inner" and top["source"]["sourceReference"] > 0
    src, _ = r.answer("source", {"sourceReference": top["source"]["sourceReference"]})
    assert src["content"] == "x = 1\n"
    scopes, _ = r.answer("scopes", {"frameId": top["id"]})
    assert scopes["scopes"][0]["variablesReference"] == LOCALS_BASE
    variables, _ = r.answer("variables", {"variablesReference": LOCALS_BASE})
    assert variables["variables"] == [{"name": "x", "value": "1", "variablesReference": 0}]
    assert r.answer("evaluate", {"expression": "x", "frameId": 1})[0]["result"] == "1"
    body, err = r.answer("evaluate", {"expression": "x + 1", "frameId": 1})
    assert body is None and "process has exited" in err
    # Continue or a step in a replay changes nothing and fails nothing (issue 25: a toolbar click
    # raised a red toast): the session re-stops at the scene (test_postmortem's replay test).
    assert r.answer("next", {"threadId": 1}) == ({"allThreadsContinued": False}, None)
    assert r.answer("continue", {"threadId": 1}) == ({"allThreadsContinued": False}, None)
    body, err = r.answer("restart", {})
    assert body is None and "read-only" in err
    # A worker that lives on (an actor after a failed call) is not said to be gone (issue #13).
    body, err = Replay(rec, worker_live=True).answer("evaluate", {"expression": "x + 1", "frameId": 1})
    assert body is None and "runs on" in err and "exited" not in err
    assert r.answer("exceptionInfo", {"threadId": 1})[0]["exceptionId"] == "ValueError"
    body, err = r.answer("scopes", {"frameId": 99})
    assert body is None and err


def test_latest_record_per_worker_follows_adds_and_retention(tmp_path):
    store = CrashStore(tmp_path, keep=2)
    first = store.add(dict(record(1), worker={"id": "w"}))
    assert store.latest_for("w").id == first.id and len(store) == 1
    second = store.add(dict(record(2), worker={"id": "w"}))
    assert store.latest_for("w").id == second.id
    store.add(record(3))
    store.add(record(4))  # keep=2: both records of "w" are gone
    assert store.latest_for("w") is None and len(store) == 2
