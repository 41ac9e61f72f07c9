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
"""Connections that have not sent their first bytes yet, all ports together (one more closes the
oldest of them)."""

SSE_WRITE_TIMEOUT_S = _setting("RAYSLEUTH_SSE_WRITE_TIMEOUT_S", 10.0)
"""A stream client that does not take an event within this many seconds is dropped."""

EXPRESSION_BUDGET_S = _setting("RAYSLEUTH_EXPRESSION_BUDGET_S", 1.0)
"""A condition or a snapshot's expressions that take longer on one hit disarm their point in
that worker, with a note (read by the agent, from the worker's environment)."""

EVALUATE_BUDGET_S = _setting("RAYSLEUTH_EVALUATE_BUDGET_S", 10.0)
"""An evaluate in a paused worker still running then is interrupted (Python code) or left
behind (C code) and answered "still running"; the worker takes a continue meanwhile."""
