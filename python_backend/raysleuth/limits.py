"""Every bound on what a client may send the broker (and through it, the workers), in one place.
Each is a setting: the environment variable named in its comment, read by the broker at start.
The README's Security section lists them with the measurements they were chosen from."""

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
