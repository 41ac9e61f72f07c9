"""Ray Serve: a cluster breakpoint in a deployment's `__call__` stops a real HTTP request in its
replica; the request waits while the replica is paused and answers after POST /v1/continue.

Serve ships the deployment's class by value (the module's `Doubler` is a Deployment, not the
class), so the replica rebuilds it from a pickle: the agent arms it as it is rebuilt. A point set
while the replica already runs is armed too, although the replica called `gc.freeze()` after
start-up (which hides its objects from `gc.get_objects()`)."""

from __future__ import annotations

import concurrent.futures
import urllib.request
from pathlib import Path

import fw_serve
from helpers import marker_line, wait_until
from ray import serve

JOB = str(Path(fw_serve.__file__).resolve())
LINE = marker_line(JOB, "serve-call")


def get(url: str, timeout: float = 120) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.status, resp.read().decode()


def paused_at_line(client) -> list[dict]:
    return [
        w
        for w in client.workers()
        if w["state"] == "paused"
        and w["paused_at"]
        and (w["paused_at"]["path"], w["paused_at"]["line"]) == (JOB, LINE)
    ]


def hold_a_request_at_the_point(client, url: str) -> None:
    """A request with x=21 stops in __call__, waits while paused, and answers after continue."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        answer = pool.submit(get, f"{url}?x=21")
        (w,) = wait_until(lambda: paused_at_line(client), 30, message="the replica paused in __call__")
        assert not answer.done(), "the HTTP request waits while its replica is paused"
        rows = client.post("/v1/evaluate", {"expression": "(x, type(self).__name__)"})
        assert [(r["worker"], r["value"]) for r in rows] == [(w["id"], "(21, 'Doubler')")]
        assert client.post("/v1/continue", {})["continued"] == [w["id"]]
        assert answer.result(timeout=60) == (200, "doubled 42")
    assert not paused_at_line(client)


def test_point_set_before_the_deployment_stops_a_request(client, serve_url, clean_points):
    client.set_breakpoints(JOB, [{"line": LINE, "condition": "x == 21"}])
    serve.run(fw_serve.app, name="fw-early", route_prefix="/early")  # a new replica, point known
    early = serve_url.rsplit("/", 1)[0] + "/early"
    try:
        hold_a_request_at_the_point(client, early)
    finally:
        serve.delete("fw-early")


def test_point_set_while_the_replica_runs_stops_the_next_request(client, serve_url, clean_points):
    assert get(f"{serve_url}?x=1") == (200, "doubled 2")  # the replica is up and has served once
    client.set_breakpoints(JOB, [{"line": LINE, "condition": "x == 21"}])
    wait_until(
        lambda: sum(b["armed"] for b in client.breakpoints() if b["line"] == LINE) >= 1,
        15,
        message="the point armed in the running replica",
    )
    hold_a_request_at_the_point(client, serve_url)
