"""What the HTTP fuzz test sends (issue #16): each route's valid body and its fields, so each can
be given the wrong thing, and the hypothesis strategies for bodies, methods and request targets."""

from __future__ import annotations

import json
from urllib.parse import quote

from hypothesis import strategies as st

# --- what a route accepts, so each field can be given the wrong thing ---------------------------

SAFE_BP = {"line": 3, "condition": "x > 1", "hitCondition": ">2", "logMessage": "x={x}", "ranks": [-5]}
ROUTES = {
    # route: a valid body (that touches no real worker: ranks and ids match none)
    ("PUT", "/v1/breakpoints"): {"path": "/fuzz/a.py", "owner": "fuzz", "breakpoints": [SAFE_BP]},
    ("POST", "/v1/snapshots"): {
        "path": "/fuzz/a.py",
        "line": 3,
        "condition": "x",
        "ranks": [-5],
        "count": 1,
        "expressions": ["x"],
        "owner": "fuzz",
        "root": "/fuzz",
    },  # fmt: skip
    ("POST", "/v1/evaluate"): {"expression": "1 + 1", "ranks": [-5], "workers": ["zz-none"]},
    ("POST", "/v1/continue"): {"ranks": [-5], "workers": ["zz-none"]},
    ("POST", "/v1/pause"): {"ranks": [-5], "workers": ["zz-none"]},
    ("PUT", "/v1/settings"): {"all_stop": False},
    ("PUT", "/v1/stacks/watch"): {"interval": 3600, "samples": 3},
}
EXPRESSION_FIELDS = [
    (("POST", "/v1/evaluate"), "expression"),
    (("POST", "/v1/snapshots"), "expressions"),
    (("POST", "/v1/snapshots"), "condition"),
    (("PUT", "/v1/breakpoints"), "breakpoints.0.condition"),
    (("PUT", "/v1/breakpoints"), "breakpoints.0.logMessage"),
]
FIELDS = [(route, field) for route, body in ROUTES.items() for field in body] + [
    (("PUT", "/v1/breakpoints"), f"breakpoints.0.{f}") for f in SAFE_BP
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


def harmless(field: str, value):
    """A fuzzed value of the right type must still touch no real worker, nor run a fast watch."""
    name = field.rsplit(".", 1)[-1]
    if name == "workers" and isinstance(value, list) and all(isinstance(v, str) for v in value):
        return ["zz-" + v for v in value]
    if name == "ranks" and isinstance(value, list):
        return [-1000 - abs(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in value]
    if name == "interval" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return 3600
    return value


def with_field(body: dict, field: str, value) -> dict:
    body = json.loads(json.dumps(body))
    *where, last = field.split(".")
    target = body
    for key in where:
        target = target[int(key)] if isinstance(target, list) else target[key]
    target[last] = value
    return body


JSON = {"Content-Type": "application/json"}


def is_plain_origin_form(target: str) -> bool:
    """A target aiohttp's parser takes and routes (the middleware answers): `/path?query` in
    printable ASCII, under its 8 KiB line limit. Other forms (`*`, absolute URLs, raw bytes) are
    answered by the parser itself, in text."""
    return (
        target.startswith("/") and target.isascii() and target.isprintable() and " " not in target
        and len(target) < 8000
    )  # fmt: skip


def content_types():
    return st.sampled_from(
        [JSON, {}, {"Content-Type": "text/plain"}, {"Content-Type": "application/json; charset=latin-1"}]
    )


def bad_json():
    not_json = st.binary(max_size=200).filter(lambda b: not _is_json_object(b))
    cut = st.builds(
        lambda body, frac: json.dumps(body).encode()[: max(1, int(len(json.dumps(body)) * frac))],
        st.sampled_from(list(ROUTES.values())),
        st.floats(0.0, 0.95),
    )
    non_object = json_values.filter(lambda v: not isinstance(v, dict)).map(lambda v: json.dumps(v).encode())
    return st.one_of(not_json, cut, non_object, st.just(b""), st.just(b"\xff\xfe{}"))


def _is_json_object(raw: bytes) -> bool:
    try:
        return isinstance(json.loads(raw), dict)
    except ValueError:
        return False


def huge_body(shape: str, size: int) -> bytes:
    if shape == "string":
        return b'{"path": "/' + b"a" * size + b'", "breakpoints": []}'
    if shape == "array":
        return b'{"breakpoints": [' + b"1," * (size // 2) + b"1]}"
    if shape == "nested":
        depth = min(size, 500_000)
        return b"[" * depth + b"]" * depth
    depth = 1 + size % 950  # parseable: deep, but inside Python's recursion limit
    return (
        b'{"path": "/fuzz/a.py", "breakpoints": [{"line": 1, "condition": '
        + (b'{"a": ' * depth + b"1" + b"}" * depth)
        + b"}]}"
    )


KNOWN_METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS")
"""Methods aiohttp's parser passes on to the router; it answers others (`A`, `FOO`) itself."""


def methods():
    return st.sampled_from(KNOWN_METHODS) | st.text(
        alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ", min_size=1, max_size=8
    )


QUERY_ROUTES = [
    "/v1/workers", "/v1/workers/{id}", "/v1/workers/{id}/logs", "/v1/events", "/v1/logs",
    "/v1/inspect", "/v1/snapshots/{id}", "/v1/crashes/{id}", "/v1/breakpoints",
    "/v1/stacks", "/v1/gpu", "/v1/nodes", "/v1/doctor", "/v1/{id}", "/{id}", "/v2/workers",
]  # fmt: skip
QUERY_KEYS = ["offset", "max", "stream", "since", "name", "step", "rtol", "owner", "job", "ranks",
              "native", "timeout"]  # fmt: skip


def targets():
    """Request targets: real routes with fuzzed ids and query strings, and raw junk."""

    def build(route, wid, params, quoted):
        path = route.replace("{id}", quote(wid, safe="") if quoted else wid)
        if params:
            q = "&".join(f"{quote(k, safe='') if quoted else k}={quote(v, safe='') if quoted else v}"
                         for k, v in params)  # fmt: skip
            path += "?" + q
        return path

    pairs = st.lists(
        st.tuples(st.sampled_from(QUERY_KEYS) | st.text(max_size=5), st.text(max_size=30)), max_size=4
    )
    routed = st.builds(build, st.sampled_from(QUERY_ROUTES), st.text(max_size=40), pairs, st.booleans())
    junk = st.text(max_size=60).map(lambda t: "/" + t) | st.sampled_from(
        ["*", "//", "/v1/../v1/status", "/%zz", "/v1/workers/%00", "/" + "a" * 9000, "http://x/v1/status"]
    )
    return routed | junk
