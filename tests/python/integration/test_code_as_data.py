"""Code that arrives as data (#11): a cluster point set before the job fires on the first call of
code that reached the worker inside a task's arguments or a Ray Data plan, never through Ray's
function manager: pickled by value (a registered module, a driver's `__main__`) or by
reference (a module the worker first imports while it reads the argument). Real cluster, real
agents and broker; Ray Data with its own API.

Each case runs in workers of its own (a runtime_env of its own), so none of them has met the
code before: what fires was armed when the code arrived.
"""

from __future__ import annotations

import concurrent.futures
import importlib.util
import json
import os
import subprocess
import sys
import uuid

import data_udfs
import pytest
import ray
import ray.cloudpickle
from helpers import FIXTURES, marker_line, wait_until

UDFS = str(FIXTURES / "data_udfs.py")
needs_data = pytest.mark.skipif(
    importlib.util.find_spec("pandas") is None or importlib.util.find_spec("pyarrow") is None,
    reason="Ray Data needs pandas and pyarrow: pip install 'ray[data]' (scripts/setup.sh)",
)
MAIN = str(FIXTURES / "data_main.py")


@pytest.fixture
def clean_points(client):
    client.delete("/v1/breakpoints")
    yield
    client.delete("/v1/breakpoints")
    client.post("/v1/continue", {})


def fresh() -> dict:
    """A runtime_env no worker has yet: Ray starts new workers for it."""
    return {"env_vars": {"RAYSLEUTH_TEST_CASE": uuid.uuid4().hex[:8]}}


def carrier():
    """A remote function that calls what it is given. Nested, so cloudpickle sends it by value:
    it never makes the worker import data_udfs itself."""

    def apply(fn, *args):
        return fn(*args)

    return ray.remote(num_cpus=0)(apply).options(runtime_env=fresh())


def last_seq(client) -> int:
    logs = client.get("/v1/logs")
    return logs[-1]["seq"] if logs else 0


def logs_with(client, since: int, prefix: str, count: int = 1) -> list[dict]:
    """The logpoint lines starting with `prefix` since `since`, once there are `count` of them."""

    def lines():
        found = [r for r in client.get(f"/v1/logs?since={since}") if r["message"].startswith(prefix)]
        return found if len(found) >= count else None

    return wait_until(lines, 15, 0.1, f"{count} logpoint line(s) '{prefix}…'")


def logpoint(client, path: str, marker: str, message: str, condition: str | None = None) -> None:
    bp = {"line": marker_line(path, marker), "logMessage": message}
    if condition:
        bp["condition"] = condition
    client.set_breakpoints(path, [bp])


def test_function_pickled_by_value_fires_on_its_first_call(client, ray_cluster, clean_points):
    since = last_seq(client)
    logpoint(client, UDFS, "data-scale", "byvalue {x}")
    ray.cloudpickle.register_pickle_by_value(data_udfs)
    try:
        ref = carrier().remote(data_udfs.scale, 7)  # pickled now, by value
    finally:
        ray.cloudpickle.unregister_pickle_by_value(data_udfs)
    assert ray.get(ref, timeout=60) == 21
    assert [r["message"] for r in logs_with(client, since, "byvalue")] == ["byvalue 7"]


def test_callable_instance_pickled_by_reference_fires_on_its_first_call(client, ray_cluster, clean_points):
    since = last_seq(client)
    logpoint(client, UDFS, "data-offset", "byref {x}+{self.k}")
    # The fresh worker imports data_udfs only while it reads this argument.
    assert ray.get(carrier().remote(data_udfs.Offset(5), 1), timeout=60) == 6
    assert [r["message"] for r in logs_with(client, since, "byref")] == ["byref 1+5"]


@needs_data
def test_main_functions_of_a_driver_script_fire_train_loop_and_data_udf(ray_cluster, client, clean_points):
    """A driver's `__main__`: a Train-style loop passed to a task, a Ray Data callable class."""
    since = last_seq(client)
    client.set_breakpoints(
        MAIN,
        [
            {"line": marker_line(MAIN, "main-loop"), "condition": "step == 1", "logMessage": "loop {step}"},
            {"line": marker_line(MAIN, "main-udf"), "logMessage": "udf {ids.tolist()}"},
        ],
    )
    out = subprocess.run(
        [sys.executable, MAIN, ray_cluster.address_info["gcs_address"]],
        capture_output=True,
        text=True,
        timeout=150,
        env={**os.environ, "RAYSLEUTH": "0"},  # the driver itself runs no agent; its workers do
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"loop": 6, "ids": [0, 3, 6, 9]}
    assert [r["message"] for r in logs_with(client, since, "loop")] == ["loop 1"]
    assert [r["message"] for r in logs_with(client, since, "udf")] == ["udf [0, 1, 2, 3]"]


@needs_data
def test_data_map_batches_function_and_callable_class_fire(client, ray_cluster, clean_points):
    since = last_seq(client)
    client.set_breakpoints(
        UDFS,
        [
            {"line": marker_line(UDFS, "data-batch"), "logMessage": "batch {ids.tolist()}"},
            {"line": marker_line(UDFS, "data-add"), "logMessage": "add {ids.tolist()}+{self.k}"},
        ],
    )
    ds = (
        ray.data.range(4, override_num_blocks=2)
        .map_batches(data_udfs.double_batch, batch_size=2, runtime_env=fresh())
        .map_batches(data_udfs.AddBatch, fn_constructor_args=(100,), batch_size=2, concurrency=1)
    )
    assert sorted(r["id"] for r in ds.take_all()) == [100, 102, 104, 106]
    batches = sorted(r["message"] for r in logs_with(client, since, "batch", 2))
    assert batches == ["batch [0, 1]", "batch [2, 3]"]
    adds = sorted(r["message"] for r in logs_with(client, since, "add", 2))
    assert adds == ["add [0, 2]+100", "add [4, 6]+100"]


@needs_data
def test_data_conditional_breakpoint_stops_once(client, ray_cluster, clean_points):
    line = marker_line(UDFS, "data-batch")
    client.set_breakpoints(UDFS, [{"line": line, "condition": "int(ids[0]) == 2"}])
    ds = ray.data.range(4, override_num_blocks=2).map_batches(
        data_udfs.double_batch, batch_size=2, runtime_env=fresh()
    )
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        rows = pool.submit(ds.take_all)
        w = wait_until(
            lambda: next((w for w in client.workers() if w["state"] == "paused"), None),
            60,
            0.2,
            "a worker paused in the UDF",
        )
        assert (w["paused_at"]["path"], w["paused_at"]["line"]) == (UDFS, line)
        values = client.post("/v1/evaluate", {"expression": "ids.tolist()"})
        assert [r["value"] for r in values] == ["[2, 3]"]
        assert client.post("/v1/continue", {})["continued"] == [w["id"]]
        assert sorted(r["id"] for r in rows.result(timeout=60)) == [0, 2, 4, 6]
    # A second stop would have held take_all; the table settles with the worker's next report.
    wait_until(
        lambda: not [w for w in client.workers() if w["state"] == "paused"], 10, 0.2, "no worker paused"
    )


@needs_data
def test_data_udf_that_raises_leaves_a_record_with_the_udf_frame(client, ray_cluster, clean_points):
    ds = ray.data.range(4, override_num_blocks=2).map_batches(
        data_udfs.explode, batch_size=2, runtime_env=fresh()
    )
    known = {c["id"] for c in client.get("/v1/crashes")}
    with pytest.raises(Exception) as info:
        ds.take_all()
    assert "bad ids" in str(info.value)
    rec = wait_until(
        lambda: next((c for c in client.get("/v1/crashes") if c["id"] not in known), None),
        30,
        0.2,
        "a crash record of the UDF",
    )
    full = client.get(f"/v1/crashes/{rec['id']}")
    frames = [(f["path"], f["function"], f["line"]) for f in full["frames"]]
    udf = next((f for f in full["frames"] if f["path"] == UDFS and f["function"] == "explode"), None)
    assert udf is not None, frames
    assert udf["line"] == marker_line(UDFS, "data-raise")
    assert udf["locals"]["ids"].startswith("ndarray[2] int64"), udf["locals"]  # a summary (#14)


DRIVER_FAILS = str(FIXTURES / "data_driver_fails.py")


@needs_data
@pytest.mark.parametrize("shape", ["job-env", "call-env", "submit"])
def test_a_failing_udf_of_a_job_run_as_its_own_driver_leaves_its_record(client, ray_cluster, shape):
    """Issue 25, item 10: the driver exits on the UDF's error and Ray ends the job's workers; the
    record of the raise still arrives, with the UDF's frame, whatever turned the agent on."""
    known = {c["id"] for c in client.get("/v1/crashes")}
    if shape == "submit":
        from ray.job_submission import JobSubmissionClient

        jobs = JobSubmissionClient(f"http://{ray_cluster.dashboard_url}")
        env = {"env_vars": {"RAYSLEUTH": "1", "PYTHONPATH": str(FIXTURES)}}

        def submit():
            try:
                return jobs.submit_job(
                    entrypoint=f"{sys.executable} {DRIVER_FAILS} job plain", runtime_env=env
                )
            except RuntimeError as exc:  # the dashboard's job agent starts a while after the cluster
                if "No available agent" in str(exc):
                    return None
                raise

        job = wait_until(submit, 90, 1.0, "the dashboard's job agent to take the job")
        status = wait_until(
            lambda: (s := jobs.get_job_status(job)).is_terminal() and s, 150, 0.5, "the submitted job to end"
        )
        assert str(status) == "FAILED" and "row 25" in jobs.get_job_logs(job)
    else:
        out = subprocess.run(
            [sys.executable, DRIVER_FAILS, ray_cluster.address_info["gcs_address"], shape],
            capture_output=True,
            text=True,
            timeout=150,
            env={**os.environ, "RAYSLEUTH": "0"},  # the driver itself runs no agent; its workers do
            check=False,
        )
        assert out.returncode != 0 and "row 25" in out.stderr, out.stderr[-3000:]
    rec = wait_until(
        lambda: next(
            (
                c
                for c in client.get("/v1/crashes")
                if c["id"] not in known and c.get("exc_type") == "ValueError"
            ),
            None,
        ),
        60,
        0.5,
        f"the UDF's crash record ({shape})",
    )
    full = client.get(f"/v1/crashes/{rec['id']}")
    udf = next((f for f in full["frames"] if f["function"] == "explode_at_25"), None)
    assert udf is not None, [(f["path"], f["function"]) for f in full["frames"]]
    assert udf["line"] == marker_line(DRIVER_FAILS, "driver-raise") and "row 25" in full["message"]
    assert full["raised_as"].startswith("ray.exceptions.UserCodeException")  # Ray Data's wrapper
