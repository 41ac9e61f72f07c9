"""Instrumentation backends of the light trigger: how an armed line calls the hook.

- `monitoring` (Python 3.12+): `sys.monitoring` LINE events on the armed code objects only.
- `rewrite` (Python 3.11): the function's `__code__` swapped for a copy that calls the hook.

Both re-arm in the same order: `rearm_begin()` keeps the old set on, `arm()` adds the new one,
`rearm_end()` gives back only what the new set did not arm, so code that runs during a rescan
never runs bare. Neither may print or raise into user code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from raysleuth.agent.backends.monitoring import MonitoringBackend
    from raysleuth.agent.backends.rewrite import RewriteBackend

    Backend = MonitoringBackend | RewriteBackend

import os
import sys


def use_monitoring() -> bool:
    """sys.monitoring on 3.12+, unless RAYSLEUTH_TRIGGER names a backend."""
    forced = os.environ.get("RAYSLEUTH_TRIGGER")
    if forced:
        return forced == "monitoring"
    return sys.version_info >= (3, 12)


def make_backend(hook, on_line) -> Backend:
    """The backend for this interpreter: `hook(line)` is called by rewritten code (frame one up),
    `on_line(code, line)` by sys.monitoring."""
    if use_monitoring():
        from raysleuth.agent.backends.monitoring import MonitoringBackend

        return MonitoringBackend.shared(on_line)
    from raysleuth.agent.backends.rewrite import RewriteBackend

    return RewriteBackend(hook)
