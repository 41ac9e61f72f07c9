"""The agent never kills a worker (#22): many short-lived workers with the agent on, in this
session's job and in a job with a job-level runtime_env, with tasks, actors and Ray Data, each
calling the registry from the agent's thread; then no worker log of the session holds a fatal
Ray check. (Before the fix, about 7 in 100 such worker starts aborted.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import churn_job
import pytest
import ray
from helpers import (
    DELIBERATE_ABORTS,
    FIXTURES,
    assert_no_fatal_checks,
    fatal_checks_in,
    live_worker_id,
    wait_until,
)

pytest.importorskip("ray.data")


def test_short_lived_workers_with_the_agent_never_die_of_a_ray_check(ray_cluster, client):
    session = ray_cluster.address_info["session_dir"]
    here = churn_job.churn(rounds=3)
    assert len(here) == 24 and all(w["registered_s"] is not None for w in here), here
    assert churn_job.data_rows() == 8

    token = uuid.uuid4().hex
    out = subprocess.run(
        [sys.executable, str(FIXTURES / "churn_job.py"), ray_cluster.address_info["gcs_address"], "2", token],
        capture_output=True, text=True, timeout=300, env=job_env(), check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    job = last_json(out.stdout)
    assert len(job["workers"]) == 16 and all(w["registered_s"] is not None for w in job["workers"]), job
    assert job["data_rows"] == 8 and token in job["udf_error"]

    def udf_record():
        for summary in client.get("/v1/crashes"):
            record = client.get(f"/v1/crashes/{summary['id']}")
            if token in (record.get("message") or "") + (record.get("traceback") or ""):
                return record
        return None

    record = wait_until(udf_record, timeout=30, message="the crash record of the job's failing Ray Data UDF")
    # The UDF's own error is named; Ray Data's wrapper is kept beside it.
    assert (record["exc_type"] or "").endswith("ValueError"), record["exc_type"]
    assert (record["raised_as"] or "").startswith("ray.exceptions.UserCodeException"), record["raised_as"]
    assert_no_fatal_checks(fatal_checks_in(session))


def test_a_worker_ray_aborts_gets_a_record_naming_the_check(ray_cluster, client, tmp_path):
    """Ray aborts a worker (its own bug, made to happen on cue in a job of its own): the broker
    files a record whose hint names the check, not a bare `exited (no agent)`."""
    pid_dir, go = tmp_path / "pids", tmp_path / "go"
    pid_dir.mkdir()
    command = [
        sys.executable,
        str(FIXTURES / "churn_job.py"),
        ray_cluster.address_info["gcs_address"],
        "abort",
    ]
    job = subprocess.Popen(
        [*command, str(pid_dir), str(go)], stdout=subprocess.PIPE, text=True, env=job_env()
    )
    try:
        pid = int(
            wait_until(lambda: next(iter(os.listdir(pid_dir)), None), 60, message="a worker of the job")
        )
        wid = live_worker_id(client, pid, 30)
        go.touch()
        out, _ = job.communicate(timeout=200)
    finally:
        DELIBERATE_ABORTS.update(int(p) for p in os.listdir(pid_dir))
        job.kill()
    outcome = last_json(out)["outcome"]
    if outcome == "ran":
        pytest.skip(f"Ray {ray.__version__} does not abort a worker that submits before its first task")
    assert outcome == "WorkerCrashedError"
    summary = wait_until(
        lambda: next((c for c in client.get("/v1/crashes") if c["worker"].get("id") == wid), None),
        timeout=30,
        message="a crash record of the aborted worker",
    )
    record = client.get(f"/v1/crashes/{summary['id']}")
    check = record["ray_check"]
    assert check["check"] == "shared_lru.h:66: Check failed: value != nullptr", check
    assert record["message"] == f"Ray aborted the worker: {check['check']}"
    assert check["check"] in record["hint"] and check["file"].endswith((f"-{pid}.err", f"_{pid}.log"))
    assert "OverrideTaskOrActorRuntimeEnvInfo" in check["text"]


def job_env() -> dict:
    """A job's driver as a user starts it: the agent not switched on in its own shell."""
    return {k: v for k, v in os.environ.items() if k not in ("RAYSLEUTH", "PYTHONPATH")}


def last_json(stdout: str) -> dict:
    """The job's JSON line. Ray may print its own lines after it, or (the raylet's message of a
    dead worker, forwarded while the job prints) put its text in front of it on the same line."""
    for line in reversed(stdout.splitlines()):
        start = line.find('{"')
        if start >= 0:
            try:
                return json.loads(line[start:])
            except ValueError:
                continue
    raise AssertionError(f"no JSON line in the job's output: {stdout[-2000:]}")
