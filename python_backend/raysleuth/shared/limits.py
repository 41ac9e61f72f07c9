"""Every bound on what a client may send the broker (and through it, the workers), in one place.
Each is a setting: the environment variable named in its comment, read by the broker at start.
docs/security.md lists them (the Limits table)."""

from __future__ import annotations

import os


def _setting(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        return default
    return value if value > 0 else default


MAX_EXPRESSION_CHARS = int(_setting("RAYSLEUTH_MAX_EXPRESSION_CHARS", 2000))
"""Longest condition, snapshot expression or evaluate (characters)."""

MAX_EXPRESSION_DEPTH = int(_setting("RAYSLEUTH_MAX_EXPRESSION_DEPTH", 60))
"""Deepest nesting of an expression's syntax tree (`a+b+c` is 3 deep)."""

MAX_POINTS_PER_FILE = int(_setting("RAYSLEUTH_MAX_POINTS_PER_FILE", 200))
"""Breakpoints one PUT may set in one file (one owner)."""

MAX_POINTS = int(_setting("RAYSLEUTH_MAX_POINTS", 2000))
"""Breakpoints in the cluster set, all files and owners together."""

MAX_LOG_MESSAGE_CHARS = int(_setting("RAYSLEUTH_MAX_LOG_MESSAGE_CHARS", 1000))
"""Longest logpoint message template."""

MAX_LOG_LINE_CHARS = int(_setting("RAYSLEUTH_MAX_LOG_LINE_CHARS", 4000))
"""Longest logpoint line a worker sends and the broker serves (longer ones are cut, marked)."""

MAX_DAP_MESSAGE_BEFORE_ATTACH = int(_setting("RAYSLEUTH_MAX_DAP_MESSAGE_BEFORE_ATTACH", 1 << 20))
"""Largest DAP message (bytes) a client may send before its attach was accepted."""

MAX_DAP_MESSAGE = int(_setting("RAYSLEUTH_MAX_DAP_MESSAGE", 64 << 20))
"""Largest DAP message (bytes) of an attached session."""

DAP_BODY_TIMEOUT_S = _setting("RAYSLEUTH_DAP_BODY_TIMEOUT_S", 30.0)
"""A DAP message's body must arrive within this many seconds of its header."""

ATTACH_WITHIN_S = _setting("RAYSLEUTH_ATTACH_WITHIN_S", 60.0)
"""A DAP connection that has not attached by then is closed."""

HTTP_BODY_TIMEOUT_S = _setting("RAYSLEUTH_HTTP_BODY_TIMEOUT_S", 30.0)
"""An HTTP request's body must arrive within this many seconds."""

FIRST_BYTES_TIMEOUT_S = _setting("RAYSLEUTH_FIRST_BYTES_TIMEOUT_S", 10.0)
"""A connection must send its first bytes (HTTP or DAP) within this many seconds."""

MAX_CONNECTIONS = int(_setting("RAYSLEUTH_MAX_CONNECTIONS", 1000))
"""Open connections, all ports together. One more closes the oldest that has not proven itself
(one still sending its first request head, a DAP session not attached, an HTTP connection that
sent no token); when all have, the newcomer is closed."""

SSE_WRITE_TIMEOUT_S = _setting("RAYSLEUTH_SSE_WRITE_TIMEOUT_S", 10.0)
"""A stream client that does not take an event within this many seconds is dropped."""

EXPRESSION_BUDGET_S = _setting("RAYSLEUTH_EXPRESSION_BUDGET_S", 1.0)
"""A condition or a snapshot's expressions that take longer on one hit disarm their point in
that worker, with a note (read by the agent, from the worker's environment)."""

EVALUATE_BUDGET_S = _setting("RAYSLEUTH_EVALUATE_BUDGET_S", 10.0)
"""An evaluate in a paused worker still running then is interrupted (Python code) or left
behind (C code) and answered "still running"; the worker takes a continue meanwhile."""

AUDIT_MAX_BYTES = int(_setting("RAYSLEUTH_AUDIT_MAX_BYTES", 10 << 20))
"""The audit log's bound on disk: `audit.log` moves to `audit.log.1` (replacing the older one)
once it would pass half of it, so the two together stay within it."""

# --- bounded before and after attach (#37) ---------------------------------------------------

DAP_REQUESTS_BEFORE_ATTACH = int(_setting("RAYSLEUTH_DAP_REQUESTS_BEFORE_ATTACH", 64))
"""Requests a DAP connection may send before its attach was accepted; one more closes it (one
log line). A client needs two or three (initialize, attach)."""

MAX_UNSENT_BYTES_BEFORE_ATTACH = int(_setting("RAYSLEUTH_MAX_UNSENT_BYTES_BEFORE_ATTACH", 1 << 20))
"""Output (bytes) the broker holds for a DAP client that does not read, before its attach; past
it the connection is dropped. One message larger than it still goes out whole."""

MAX_UNSENT_BYTES = int(_setting("RAYSLEUTH_MAX_UNSENT_BYTES", 64 << 20))
"""The same bound once the DAP session attached (answers from a worker may be large)."""

HTTP_HEADER_TIMEOUT_S = _setting("RAYSLEUTH_HTTP_HEADER_TIMEOUT_S", 10.0)
"""An HTTP connection must send a request's whole head (request line and headers) within this
many seconds of connecting, and of the end of its previous answer (keep-alive); else it is
closed."""
