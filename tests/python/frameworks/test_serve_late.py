"""Ray Serve, the harder case: a breakpoint set while the replica already runs (its class was
rebuilt from a pickle before the point existed) stops the next request.

A known gap (issue 11): the point never arms in the running replica today; strict, so the test
turns red the day it passes and the marker must go."""

from __future__ import annotations

import pytest
from helpers import wait_until
from test_serve import JOB, LINE, get, hold_a_request_at_the_point


@pytest.mark.xfail(strict=True, reason="issue 11: a point set after the replica started never arms there")
def test_breakpoint_in_call_holds_the_request_until_continue(client, serve_url, clean_points):
    assert get(f"{serve_url}?x=1") == (200, "doubled 2")  # the replica is up and has served once
    client.set_breakpoints(JOB, [{"line": LINE, "condition": "x == 21"}])
    wait_until(
        lambda: sum(b["armed"] for b in client.breakpoints() if b["line"] == LINE) >= 1,
        15,
        message="the point armed in the replica",
    )
    hold_a_request_at_the_point(client, serve_url)
