"""Fuzzed DAP against the live broker's front door (issue #16), on its DAP port and on the HTTP
port that takes DAP too: bad headers, lying Content-Length, invalid JSON, unknown commands,
wrong seq, requests before initialize, a flood. Each bad frame closes the connection; each bad
request gets a failed response with a message; nothing hangs, the broker takes the next session
and its memory and connections stay bounded.

Hypothesis generates the inputs; the seed is printed: replay with RAYSLEUTH_FUZZ_SEED=<seed>.
"""

from __future__ import annotations

import collections
import json
import socket
from urllib.parse import urlsplit

import pytest
from helpers import dap_address, wait_until
from hypothesis import given
from hypothesis import strategies as st
from wire import (
    broker_connections,
    broker_rss_mb,
    dap_frame,
    fuzz_seed,
    fuzz_settings,
    parse_dap,
    read_until_closed,
    send_quietly,
    shut_write,
)

from raysleuth.shared.peer import check_broker_peer

SEED = fuzz_seed()
COUNT: collections.Counter = collections.Counter()
"""Fuzzed frames sent, per kind (the test asserts at least 500 in all)."""

RSS_GROWTH_MB = 40.0
"""Bound on the broker's RSS growth over the run. A session holds at most one message being read
(framing caps one at 64 MiB; these are at most a few MB) and drops everything at its end; a
broker that kept each session's messages or events would grow by far more (the event flood
alone is 20,000 messages on one session)."""

REQUESTS_BEFORE_ATTACH = 64
"""Requests a session takes before an attach (RAYSLEUTH_DAP_REQUESTS_BEFORE_ATTACH); one more
closes it."""

PROBE_SEQ = 424242
PROBE = {"seq": PROBE_SEQ, "type": "request", "command": "threads"}
"""A good request after the bad ones: answered (a failed `threads`: no worker attached), unless
the bad bytes closed the session."""

COMMANDS = ["initialize", "attach", "launch", "configurationDone", "threads", "stackTrace",
            "scopes", "variables", "evaluate", "setBreakpoints", "continue", "next", "pause",
            "terminate", "source", "setExceptionBreakpoints", "__init__", "__class__", "respond",
            "release", "run"]  # fmt: skip
"""Known and unknown commands; never `disconnect`, which ends a session by design."""


def fuzz(n: int):
    return fuzz_settings(n, SEED)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=10,
)
MISSING = object()


surrogates = st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=4)
odd_text = surrogates | st.text(st.characters(min_codepoint=0x80), min_size=1, max_size=40)
"""Lone surrogates (valid in JSON text, not in UTF-8) and non-ASCII text: a token of them is refused."""


def messages(token: str):
    """DAP-shaped messages with fuzzed fields; attach with the right token aims at no worker."""
    command = st.sampled_from(COMMANDS) | st.text(max_size=20).filter(lambda c: c != "disconnect")
    target = st.fixed_dictionaries(
        {"token": st.sampled_from([token, "wrong"]) | json_values | odd_text},
        optional={
            "worker": st.text(max_size=12).map(lambda t: "~" + t) | st.lists(st.integers()) | st.floats(),
            "rank": (st.integers(max_value=-1) | st.floats() | st.text(max_size=8)).filter(no_live_rank)
            | st.lists(st.none()),
            "crash": json_values,
            "pathMappings": json_values,
            "localRoot": json_values,
            "job": json_values,
        },
    )
    arguments = json_values | target
    return st.builds(
        lambda seq, kind, cmd, args: {
            k: v
            for k, v in {"seq": seq, "type": kind, "command": cmd, "arguments": args}.items()
            if v is not MISSING
        },
        st.integers(-(2**70), 2**70) | json_values | st.just(MISSING),
        st.sampled_from(["request", "request", "request", "event", "response"]) | json_values,
        command,
        arguments | st.just(MISSING),
    )


def no_live_rank(value) -> bool:
    """An attach rank that names no worker (int() of it fails or is negative): the fuzz must
    never attach a real worker of the shared cluster."""
    try:
        return int(value) < 0
    except (TypeError, ValueError, OverflowError):
        return True


def bad_frames():
    """(bytes, closes): framing the broker must refuse by closing the session (closes=True), or
    may skip (an unknown header under the line limit: closes=False)."""
    body = st.binary(max_size=100).filter(lambda b: not _is_json_object(b))
    return st.one_of(
        body.map(lambda b: (dap_frame(b), True)),  # not JSON, or JSON but not an object
        st.integers(-(10**12), -1).map(lambda n: (b"Content-Length: %d\r\n\r\n{}" % n, True)),
        st.integers(64 * 2**20 + 1, 10**15).map(lambda n: (b"Content-Length: %d\r\n\r\n{}" % n, True)),
        st.text(max_size=10)
        .filter(lambda t: not t.strip().isdigit())
        .map(lambda t: (("Content-Length: " + t + "\r\n\r\n{}").encode(), True)),
        st.integers(1, 70_000).map(lambda n: (b"Content-Length: " + b"9" * n + b"\r\n\r\n", True)),
        # over asyncio's 64 KiB line limit when the header line up to its \n is longer than that
        st.integers(1, 70_000).map(lambda n: (junk_header(n), len(b"X-Junk: \r") + n > 2**16)),
        st.tuples(st.integers(1, 200), st.booleans()).map(lambda t: (lying_length(*t), True)),
    )


def junk_header(n: int) -> bytes:
    """The probe with an unknown header of n bytes: skipped, unless over the line limit."""
    body = json.dumps(PROBE).encode()
    return b"Content-Length: %d\r\nX-Junk: %s\r\n\r\n" % (len(body), b"j" * n) + body


def lying_length(by: int, longer: bool) -> bytes:
    body = json.dumps(PROBE).encode()
    n = len(body) + by if longer else max(0, len(body) - by)
    return b"Content-Length: %d\r\n\r\n" % n + body


def _is_json_object(raw: bytes) -> bool:
    try:
        return isinstance(json.loads(raw), dict)
    except ValueError:
        return False


def exchange(addr, data: bytes) -> list[dict]:
    """Send, half-close, read every message the broker sends until it closes (Hang if never)."""
    with socket.create_connection(addr, timeout=10) as sock:
        check_broker_peer(sock, f"{addr[0]}:{addr[1]}")  # attach frames carry the token (#37)
        send_quietly(sock, data)
        shut_write(sock)
        return parse_dap(read_until_closed(sock))


def answered(replies: list[dict], seq) -> dict | None:
    return next((r for r in replies if r.get("type") == "response" and r.get("request_seq") == seq), None)


@pytest.fixture(scope="module")
def doors(broker):
    http = urlsplit(broker.http)
    return [dap_address(broker), (http.hostname, http.port)]


def good_session(addr) -> None:
    """A well-behaved client still gets its `initialize` answered."""
    replies = exchange(
        addr, dap_frame({"seq": 1, "type": "request", "command": "initialize", "arguments": {}})
    )
    resp = answered(replies, 1)
    assert resp and resp["success"] and resp["body"]["supportsConfigurationDoneRequest"], (replies, SEED)


def test_fuzzed_dap_frames_get_an_error_or_a_close_never_a_hang(broker, doors):
    print(f"fuzz seed: {SEED} (replay with RAYSLEUTH_FUZZ_SEED={SEED})")
    pid = broker.proc.pid
    for _ in range(20):
        good_session(doors[0])
    rss0, conns0 = broker_rss_mb(pid), broker_connections(pid)

    @fuzz(260)
    @given(door=st.sampled_from(doors), msgs=st.lists(messages(broker.token), min_size=1, max_size=4))
    def bad_requests(door, msgs):
        replies = exchange(door, b"".join(dap_frame(m) for m in msgs) + dap_frame(PROBE))
        COUNT["requests"] += len(msgs)
        for r in replies:
            if r.get("type") == "response" and not r.get("success"):
                assert r.get("message"), f"a failed response without a message: {r} (seed {SEED})"
        probe = answered(replies, PROBE_SEQ)
        assert probe is not None, f"no answer to a good request after {msgs!r}: {replies} (seed {SEED})"
        assert not probe["success"] and "attach" in probe["message"], probe
        for m in msgs:
            s = m.get("seq")
            if m.get("type") == "request" and isinstance(s, int) and s != PROBE_SEQ:
                assert answered(replies, s), f"{m!r} got no answer: {replies} (seed {SEED})"

    @fuzz(200)
    @given(door=st.sampled_from(doors), bad=bad_frames(), before=st.booleans())
    def bad_framing(door, bad, before):
        data, closes = bad
        good = dap_frame({"seq": 7, "type": "request", "command": "initialize"})
        replies = exchange(door, (good if before else b"") + data + dap_frame(PROBE))
        COUNT["framing"] += 1
        if before and not closes:
            assert answered(replies, 7), f"initialize before {data[:80]!r} unanswered (seed {SEED})"
        probe = answered(replies, PROBE_SEQ)
        if closes:  # the session closed at the bad frame: the probe after it is never read
            assert probe is None, f"{data[:100]!r} was taken: {replies} (seed {SEED})"

    @fuzz(30)
    @given(n=st.integers(50, 200), cmd=st.sampled_from(COMMANDS[1:]))
    def flood(n, cmd):
        data = b"".join(dap_frame({"seq": i, "type": "request", "command": cmd}) for i in range(1, n + 1))
        replies = exchange(doors[0], data)
        COUNT["flood"] += n
        got = [r["request_seq"] for r in replies if r.get("type") == "response"]
        # Past the bound the broker resets the session (#37): answers it had not sent yet are
        # lost with it, so a flood gets the first answers in order, at most one per request taken.
        want = list(range(1, min(n, REQUESTS_BEFORE_ATTACH) + 1))
        ok = got == want if n <= REQUESTS_BEFORE_ATTACH else got == want[: len(got)]
        assert ok, f"{cmd} x{n}: answers {got[:10]}.. ({len(got)}, seed {SEED})"

    for gen in (bad_requests, bad_framing, flood):
        gen()
        good_session(doors[0])
        good_session(doors[1])
    event_flood(doors[0])

    rss1 = broker_rss_mb(pid)
    total = sum(COUNT.values())
    print(f"fuzzed DAP messages: {total} {dict(COUNT)}; broker RSS {rss0:.1f} -> {rss1:.1f} MB")
    assert COUNT["requests"] + COUNT["framing"] >= 500, dict(COUNT)  # the malformed ones
    assert rss1 - rss0 <= RSS_GROWTH_MB, f"RSS {rss0:.1f} -> {rss1:.1f} MB (seed {SEED})"
    wait_until(lambda: broker_connections(pid) <= conns0 + 5, 20, message="the fuzzed sessions to close")


def event_flood(addr) -> None:
    """20,000 events from a client on one session (a front door takes requests, not events):
    dropped, the probe after them answered, memory unchanged."""
    pid_events = dap_frame({"seq": 1, "type": "event", "event": "output", "body": {"output": "x" * 200}})
    replies = exchange(addr, pid_events * 20_000 + dap_frame(PROBE))
    COUNT["event flood"] += 20_000
    assert answered(replies, PROBE_SEQ), replies[:3]
