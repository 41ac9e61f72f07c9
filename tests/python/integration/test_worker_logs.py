"""A worker's stdout and stderr, read through its node's relay and followed from an offset."""

from __future__ import annotations

import uuid

import pytest
import ray
from helpers import live_worker, live_worker_id, wait_until
from talker import Talker

from raysleuth.shared.errors import SleuthError


@pytest.fixture(scope="module")
def talker(ray_cluster, client):
    a = ray.remote(num_cpus=0)(Talker).remote()
    pid = ray.get(a.pid.remote())
    w = live_worker(client, pid)
    yield a, w
    ray.kill(a)


def logs(client, wid: str, **q) -> dict:
    query = "&".join(f"{k}={v}" for k, v in q.items())
    return client.get(f"/v1/workers/{wid}/logs?{query}")


def test_stdout_and_stderr_of_a_worker_and_what_came_after(client, talker):
    a, w = talker
    tag = uuid.uuid4().hex[:8]
    ray.get(a.say.remote(f"out-{tag}-1", f"err-{tag}-1"))
    out = wait_until(
        lambda: (r := logs(client, w["id"], stream="out")) and f"out-{tag}-1" in r["data"] and r, 10
    )
    assert out["worker"] == w["id"] and out["path"].endswith(".out") and f"err-{tag}" not in out["data"]
    err = logs(client, w["id"], stream="err")
    assert f"err-{tag}-1" in err["data"] and err["path"].endswith(".err")
    ray.get(a.say.remote(f"out-{tag}-2", f"err-{tag}-2"))
    more = wait_until(
        lambda: (r := logs(client, w["id"], stream="out", offset=out["next_offset"])) and r["data"] and r, 10
    )
    assert f"out-{tag}-2" in more["data"] and f"out-{tag}-1" not in more["data"]


@pytest.mark.parametrize(
    "query, status, words",
    [
        ({"stream": "log"}, 400, "stream must be one of out, err"),
        ({"offset": "x"}, 400, "offset and max must be integers"),
        ({"max": 0}, 400, "max must be positive"),
    ],
)
def test_bad_queries_say_how(client, talker, query, status, words):
    _, w = talker
    with pytest.raises(SleuthError, match=words) as err:
        logs(client, w["id"], **query)
    assert err.value.status == status and err.value.hint


def test_an_unknown_worker_is_404(client):
    with pytest.raises(SleuthError, match="No worker with id") as err:
        logs(client, "ff" * 28)
    assert err.value.status == 404


def test_a_crashed_workers_errors_stay_readable_after_it_ended(client):
    """The Crashes view links a record to its worker's log: the process is gone, the table lists
    the worker as ended, and its stderr on the node is still served."""
    a = ray.remote(num_cpus=0, max_restarts=0)(Talker)
    a = a.options(runtime_env={"env_vars": {"RAYSLEUTH_POSTMORTEM_HOLD": "0"}}).remote()
    wid = live_worker_id(client, ray.get(a.pid.remote()))
    tag = uuid.uuid4().hex[:8]
    with pytest.raises(ray.exceptions.RayTaskError):
        ray.get(a.say_and_fail.remote(f"last words {tag}"))
    mine = lambda c: (c.get("worker") or {}).get("id") == wid  # noqa: E731
    wait_until(lambda: next(filter(mine, client.get("/v1/crashes")), None), 20, 0.2, "a crash record")
    ray.kill(a)
    state = lambda: next((w["state"] for w in client.workers() if w["id"] == wid), None)  # noqa: E731
    wait_until(lambda: state() in ("exited", "crashed"), 30, 0.2, "the worker to be listed as ended")
    err = logs(client, wid, stream="err")
    assert f"last words {tag}" in err["data"] and err["worker"] == wid and err["path"].endswith(".err")
