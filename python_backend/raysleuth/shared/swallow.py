"""The one way Ray Sleuth ignores an error on purpose: logged once, with what was being done.

`except Exception: pass` hides bugs; this keeps the decision to go on, but leaves a trace in the
caller's log (the broker's, or the agent's own file: never a worker's stdout). The first failure
of a kind is logged with its traceback, repeats of the same kind only at DEBUG.
"""

from __future__ import annotations

import contextlib
import logging
import threading

_seen: set[tuple[str, str, str]] = set()
_lock = threading.Lock()


def swallow_exception(log: logging.Logger, what: str, *args, level: int = logging.WARNING) -> None:
    """Call in an `except` block whose error must not stop the caller: `what` says what failed."""
    import sys

    exc = sys.exc_info()[1]
    key = (log.name, what, type(exc).__name__)
    with _lock:
        first = key not in _seen
        if first:
            if len(_seen) > 10_000:
                _seen.clear()
            _seen.add(key)
    try:
        if first:
            log.log(level, "ignored: " + what, *args, exc_info=True)
        else:
            log.debug("ignored again: " + what + ": %r", *args, exc)
    except Exception:  # noqa: BLE001 - a logging failure must not raise either
        return


@contextlib.contextmanager
def swallowed(log: logging.Logger, what: str, *args, level: int = logging.WARNING):
    """`with swallowed(log, "closing %s", link): ...` — the block's Exception is logged and dropped."""
    try:
        yield
    except Exception:  # noqa: BLE001 - the point of this helper
        swallow_exception(log, what, *args, level=level)
