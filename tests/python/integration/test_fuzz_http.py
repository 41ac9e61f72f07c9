"""Fuzzed HTTP against the live broker (issue #16): bad JSON, wrong types in every body field of
every route, huge and deeply nested bodies, bad paths and query strings, slow and half-closed
clients. Each gets a 4xx JSON {error, hint} (or, for bytes that are not HTTP at all, a 4xx or a
closed connection): never a 5xx, never a hang; the broker answers the next good request and its
memory stays bounded.

Hypothesis generates the inputs; the seed is printed: replay with RAYSLEUTH_FUZZ_SEED=<seed>.
"""

from __future__ import annotations

import collections
import json
import socket
import threading
import time
from urllib.parse import urlsplit

import pytest
from fuzz_inputs import (
    EXPRESSION_FIELDS,
    FIELDS,
    JSON,
    KNOWN_METHODS,
    ROUTES,
    bad_json,
    content_types,
    harmless,
    huge_body,
    is_plain_origin_form,
    json_values,
    methods,
    targets,
    with_field,
)
from hypothesis import given
from hypothesis import strategies as st
from wire import (
    broker_connections,
    broker_rss_mb,
    fuzz_seed,
    fuzz_settings,
    http_exchange,
    http_request,
    read_until_closed,
    send_quietly,
    shut_write,
)

SEED = fuzz_seed()
COUNT: collections.Counter = collections.Counter()
"""Fuzzed requests sent, per kind (the test asserts at least 500 in all)."""

RSS_GROWTH_MB = 40.0
"""Bound on the broker's RSS growth over the whole run. The largest body it takes is 1 MiB
(aiohttp's client_max_size) and it reads one body per request, so a broker that frees what it
reads grows by what its allocators keep for reuse (a few MB); one that kept each request would
grow by far more (over 100 huge bodies alone are sent)."""


def fuzz(n: int):
    return fuzz_settings(n, SEED)


# --- the checks ---------------------------------------------------------------------------------


def check_app_reply(reply, what: str) -> None:
    """A request that is valid HTTP: a 2xx, or a 4xx with the contract's JSON error."""
    assert reply.status is not None, f"{what}: the broker closed without an answer (seed {SEED})"
    assert reply.status < 500, f"{what}: {reply.status} {reply.body[:500]!r} (seed {SEED})"
    if reply.status >= 400:
        err = reply.json()
        assert isinstance(err, dict) and err.get("error") and "hint" in err, (
            f"{what}: {reply.status} without a JSON error: {reply.body[:300]!r} (seed {SEED})"
        )


def check_protocol_reply(reply, what: str) -> None:
    """Bytes that may not be HTTP: never a 5xx (aiohttp's parser answers in text), or a close.
    Some are valid after all (`GET http://x/v1/status`, the absolute form): those get a 2xx."""
    assert reply.status is None or reply.status < 500, (
        f"{what}: {reply.status} {reply.body[:300]!r} (seed {SEED})"
    )


@pytest.fixture(scope="module")
def http(broker):
    parts = urlsplit(broker.http)
    return (parts.hostname, parts.port), broker.token


def still_serving(addr, token) -> None:
    reply = http_exchange(addr, http_request("GET", "/v1/status", token), timeout=5.0)
    assert reply.status == 200 and reply.json()["version"], f"the broker stopped serving (seed {SEED})"


def test_fuzzed_http_gets_4xx_json_never_5xx_nor_a_hang(broker, http):
    addr, token = http
    print(f"fuzz seed: {SEED} (replay with RAYSLEUTH_FUZZ_SEED={SEED})")
    before = listings(addr, token)
    for _ in range(30):  # warm up: the first requests allocate what every later one reuses
        still_serving(addr, token)
    rss0, conns0 = broker_rss_mb(broker.proc.pid), broker_connections(broker.proc.pid)
    try:
        run_all(addr, token)
    finally:
        restore(addr, token, before)
    still_serving(addr, token)
    rss1 = broker_rss_mb(broker.proc.pid)
    total = sum(COUNT.values())
    print(f"fuzzed HTTP requests: {total} {dict(COUNT)}; broker RSS {rss0:.1f} -> {rss1:.1f} MB")
    assert total >= 500, dict(COUNT)
    assert rss1 - rss0 <= RSS_GROWTH_MB, f"RSS {rss0:.1f} -> {rss1:.1f} MB (seed {SEED})"
    from helpers import wait_until

    wait_until(
        lambda: broker_connections(broker.proc.pid) <= conns0 + 5,
        20,
        message="the broker to close the fuzzed connections",
    )


def run_all(addr, token) -> None:
    @fuzz(120)
    @given(route=st.sampled_from(sorted(ROUTES)), raw=bad_json(), ctype=content_types())
    def bad_json_bodies(route, raw, ctype):
        method, path = route
        reply = http_exchange(addr, http_request(method, path, token, raw, ctype))
        COUNT["bad json"] += 1
        check_app_reply(reply, f"{method} {path} {raw[:80]!r}")
        if reply.status is not None:
            assert reply.status >= 400, f"{method} {path} took {raw[:80]!r} (seed {SEED})"

    @fuzz(220)
    @given(where=st.sampled_from(FIELDS), value=json_values, extra=st.booleans())
    def wrong_types(where, value, extra):
        (method, path), field = where
        body = with_field(ROUTES[(method, path)], field, harmless(field, value))
        if extra:
            body["zz_unknown"] = value
        raw = json.dumps(body).encode()
        reply = http_exchange(addr, http_request(method, path, token, raw, JSON))
        COUNT["wrong types"] += 1
        check_app_reply(reply, f"{method} {path} {raw[:200]!r}")

    @fuzz(30)
    @given(
        route=st.sampled_from(sorted(ROUTES)),
        shape=st.sampled_from(["string", "array", "nested", "dict-nested"]),
        size=st.integers(1, 3 * 2**20),
    )
    def huge_and_nested(route, shape, size):
        method, path = route
        raw = huge_body(shape, size)
        reply = http_exchange(addr, http_request(method, path, token, raw, JSON), timeout=20)
        COUNT["huge or nested"] += 1
        check_app_reply(reply, f"{method} {path} {shape} of {len(raw)} bytes")
        if len(raw) > 2**20:  # aiohttp's client_max_size
            assert reply.status == 413, f"{method} {path}: {len(raw)} bytes got {reply.status} (seed {SEED})"

    @fuzz(130)
    @given(method=methods(), target=targets(), auth=st.booleans())
    def bad_paths_and_queries(method, target, auth):
        data = http_request(method, target, token if auth else "wrong-" + token)
        reply = http_exchange(addr, data)
        COUNT["paths and queries"] += 1
        if method in KNOWN_METHODS and is_plain_origin_form(target):
            check_app_reply(reply, f"{method} {target!r}")
            if not auth:
                assert reply.status == 401, f"{method} {target!r} without the token: {reply.status}"
        else:
            check_protocol_reply(reply, f"{method} {target!r}")

    @fuzz(40)
    @given(garbage=st.binary(min_size=1, max_size=300))
    def not_http_at_all(garbage):
        if garbage.startswith(b"Content-Length:"):
            return  # that is a DAP session on the shared port (test_fuzz_dap)
        reply = http_exchange(addr, garbage, shut=True)
        COUNT["not http"] += 1
        check_protocol_reply(reply, f"{garbage[:80]!r}")

    @fuzz(40)
    @given(route=st.sampled_from(sorted(ROUTES)), cut=st.floats(0.0, 0.99), lie=st.integers(0, 10**9))
    def half_closed(route, cut, lie):
        method, path = route
        body = json.dumps(ROUTES[route]).encode()
        data = http_request(method, path, token, body, JSON)
        if lie:  # the client promises more body than it ever sends
            data = data.replace(b"Content-Length: %d" % len(body), b"Content-Length: %d" % (len(body) + lie))
        else:
            data = data[: int(len(data) * cut)]
        reply = http_exchange(addr, data, shut=True)
        COUNT["half closed"] += 1
        check_protocol_reply(reply, f"{method} {path} cut at {cut:.2f}, lie {lie}")
        assert reply.status is None or reply.status >= 400, f"{method} {path} half sent: {reply.status}"

    @fuzz(60)
    @given(value=st.binary(min_size=0, max_size=80).filter(lambda b: b"\r" not in b and b"\n" not in b))
    def bad_tokens(value):  # invalid UTF-8, non-ASCII, NUL: a 401 (or the parser's 400), never a 500
        data = http_request("GET", "/v1/workers", None).replace(
            b"Connection: close\r\n", b"Connection: close\r\nAuthorization: Bearer " + value + b"\r\n"
        )
        reply = http_exchange(addr, data)
        COUNT["bad tokens"] += 1
        check_protocol_reply(reply, f"Bearer {value!r}")
        assert reply.status in (400, 401), f"Bearer {value!r}: {reply.status} (seed {SEED})"

    @fuzz(60)
    @given(
        where=st.sampled_from(EXPRESSION_FIELDS),
        unit=st.sampled_from(["1+", "not ", "-", "(", "a.", "[", "f(", "~", "x if y else "]),
        n=st.integers(1, 200_000),
    )
    def deep_and_long_expressions(where, unit, n):
        (method, path), field = where
        expr = unit * n + "1" + (")" * n if unit in ("(", "f(") else "]" * n if unit == "[" else "")
        value = (
            [expr]
            if field == "expressions"
            else ("x={" + expr + "}" if field.endswith("logMessage") else expr)
        )
        raw = json.dumps(with_field(ROUTES[(method, path)], field, value)).encode()
        reply = http_exchange(addr, http_request(method, path, token, raw, JSON), timeout=20)
        COUNT["deep expressions"] += 1
        check_app_reply(reply, f"{method} {path} {field}={unit!r}*{n}")
        if len(raw) < 2**20 and len(expr) > 2000:
            assert reply.status == 400, f"{field}={unit!r}*{n}: {reply.status} (seed {SEED})"

    for gen in (
        bad_json_bodies, wrong_types, huge_and_nested, bad_paths_and_queries, not_http_at_all, bad_tokens,
        deep_and_long_expressions,
    ):  # fmt: skip
        gen()
        still_serving(addr, token)
    half_closed()
    slow_clients_do_not_hold_up_others(addr, token)
    still_serving(addr, token)


def listings(addr, token) -> dict:
    def get(path):
        return http_exchange(addr, http_request("GET", path, token)).json()

    return {
        "breakpoints": get("/v1/breakpoints"),
        "snapshots": get("/v1/snapshots"),
        "settings": get("/v1/settings"),
    }


def restore(addr, token, before: dict) -> None:
    """Undo what fuzzed bodies that happened to be valid set: points, snapshots, settings, watch."""
    had = {(b["path"], b.get("owner")) for b in before["breakpoints"]}
    now = listings(addr, token)
    for path, owner in {(b["path"], b.get("owner")) for b in now["breakpoints"]} - had:
        body = json.dumps({"path": path, "owner": owner, "breakpoints": []}).encode()
        http_exchange(addr, http_request("PUT", "/v1/breakpoints", token, body, JSON))
    old = {s["id"] for s in before["snapshots"]}
    for s in now["snapshots"]:
        if s["id"] not in old:
            http_exchange(addr, http_request("DELETE", f"/v1/snapshots/{s['id']}", token))
    body = json.dumps({"all_stop": before["settings"]["all_stop"]}).encode()
    http_exchange(addr, http_request("PUT", "/v1/settings", token, body, JSON))
    http_exchange(addr, http_request("DELETE", "/v1/stacks/watch", token))


def slow_clients_do_not_hold_up_others(addr, token) -> None:
    """Three clients that dribble a request a few bytes at a time (and one that never ends its
    headers) while good requests are answered at once; then the slow ones get their answers."""
    data = http_request("PUT", "/v1/settings", token, b'{"all_stop": "maybe"}', JSON)
    replies: list = []

    def dribble():
        with socket.create_connection(addr, timeout=10) as sock:
            for i in range(0, len(data), 7):
                send_quietly(sock, data[i : i + 7])
                time.sleep(0.02)  # the client's own pace, not a wait for the broker
            replies.append(read_until_closed(sock))

    stuck = socket.create_connection(addr, timeout=10)
    stuck.sendall(b"GET /v1/status HTTP/1.1\r\nHost: x\r\n")  # and nothing more, for now
    threads = [threading.Thread(target=dribble) for _ in range(3)]
    for t in threads:
        t.start()
    for _ in range(10):
        t0 = time.monotonic()
        still_serving(addr, token)
        assert time.monotonic() - t0 < 2.0, "a slow client held up a good request"
    for t in threads:
        t.join(15)
    COUNT["slow"] += 4
    assert len(replies) == 3 and all(r.startswith(b"HTTP/1.1 400") for r in replies), replies
    shut_write(stuck)
    read_until_closed(stuck)
    stuck.close()
