"""Rerun a failed task under the debugger (issue 26): the crash record of a plain task keeps its
call; `POST /v1/crashes/{id}/rerun` runs it again as a new task stopped at the function's first
line with the failed call's arguments; continued, it raises the same error. Real cluster, agents,
broker and debugpy."""

from __future__ import annotations

import pytest
import ray
import rerun_job
from helpers import FIXTURES, marker_line, wait_until

JOB = str(FIXTURES / "rerun_job.py")


def new_crash(client, known: set, exc_type: str):
    return wait_until(
        lambda: next(
            (c for c in client.get("/v1/crashes") if c["id"] not in known and c.get("exc_type") == exc_type),
            None,
        ),
        60,
        0.2,
        f"a {exc_type} crash record",
    )


def test_a_failed_task_reruns_stopped_at_its_first_line_and_raises_again(client, ray_cluster):
    known = {c["id"] for c in client.get("/v1/crashes")}
    task = ray.remote(num_cpus=0, max_retries=0)(rerun_job.scale)
    with pytest.raises(ray.exceptions.RayTaskError, match="factor 0 for a total of 6"):
        ray.get(task.remote([1, 2, 3], 0, shift=5), timeout=60)
    rec = client.get(f"/v1/crashes/{new_crash(client, known, 'ValueError')['id']}")
    kept = rec["rerun"]
    assert kept["function"] == "rerun_job.scale" and kept["line"] == marker_line(JOB, "rerun-first"), kept
    assert kept["args"] == ["[1, 2, 3]", "0", "shift=5"], kept

    known.add(rec["id"])
    reply = client.request("POST", f"/v1/crashes/{rec['id']}/rerun", {}, timeout=90)  # a worker may start
    assert reply["crash"] == rec["id"] and reply["paused_at"]["line"] == marker_line(JOB, "rerun-first"), (
        reply
    )
    wid = reply["worker"]
    [value] = client.post("/v1/evaluate", {"expression": "(values, factor, shift)", "workers": [wid]})
    assert value["value"] == "([1, 2, 3], 0, 5)", value
    assert not [b for b in client.get("/v1/breakpoints") if b["owner"].startswith("rerun:")], "one-shot: gone"

    assert client.post("/v1/continue", {"workers": [wid]})["continued"] == [wid]
    again = client.get(f"/v1/crashes/{new_crash(client, known, 'ValueError')['id']}")
    assert again["message"] == rec["message"] and again["worker"]["id"] == wid
    assert again["frames"][0]["line"] == marker_line(JOB, "rerun-raise")


def test_a_rerun_is_refused_with_a_reason_for_an_actor_method_and_an_unknown_crash(client, ray_cluster):
    known = {c["id"] for c in client.get("/v1/crashes")}
    holder = ray.remote(num_cpus=0, max_restarts=0)(rerun_job.Holder).remote()
    with pytest.raises(ray.exceptions.RayTaskError):
        ray.get(holder.fail.remote("k"), timeout=60)
    rec = new_crash(client, known, "KeyError")
    with pytest.raises(Exception, match="cannot be rerun: an actor method") as err:
        client.post(f"/v1/crashes/{rec['id']}/rerun", {})
    assert "400" in str(err.value) or getattr(err.value, "hint", None)
    with pytest.raises(Exception, match="No crash record"):
        client.post("/v1/crashes/20200101-000000-deadbeef/rerun", {})
    ray.kill(holder)
