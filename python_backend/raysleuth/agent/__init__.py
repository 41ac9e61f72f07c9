"""The worker agent's entry points: activation by env var, by setup hook, or by `raysleuth.init()`.

Runs inside Ray workers; every entry point is idempotent and never raises into the caller.
"""

from __future__ import annotations

import importlib
import os
import threading

_agent = None
"""This process's agent, once started."""

# Nothing of the agent is imported here: this package loads at interpreter start-up (the .pth
# hook) and in every `raysleuth` call; the agent's modules load when it starts.

_lock = threading.Lock()


def get_agent():
    return _agent


def _start(source: str, wait_for_connect: bool):
    global _agent
    with _lock:
        if _agent is None:
            from raysleuth.agent.core import Agent

            _agent = Agent(source)
            _agent.start(wait_for_connect)
        return _agent


def start_when_connected(source: str = "env"):
    """Start the agent now; it waits in its thread until this process connects to Ray."""
    try:
        return _start(source, wait_for_connect=True)
    except Exception:  # noqa: BLE001 - the worker runs on without an agent
        from raysleuth.agent.log import swallow

        swallow("starting the agent (%s)", source)
        return None


def _call_user_hook(spec: str) -> None:
    module, _, fn = spec.replace(":", ".").rpartition(".")
    getattr(importlib.import_module(module), fn)()


def setup() -> None:
    """`runtime_env={"worker_process_setup_hook": "raysleuth.agent.setup"}`.

    Starts the agent (on a supported Python and Ray; else one line on stderr), then calls the
    hook named in RAYSLEUTH_SETUP_HOOK (`module.fn`), if any:
    errors of the agent are swallowed, errors of the user's own hook are the user's and propagate.
    """
    try:
        from raysleuth.shared.versions import refusal, unsupported_message

        refused = unsupported_message()
        if refused:
            import sys

            print(refusal(*refused), file=sys.stderr, flush=True)
        else:
            _start("setup_hook", wait_for_connect=True)
    except Exception:  # noqa: BLE001 - the worker runs on without an agent
        from raysleuth.agent.log import swallow

        swallow("starting the agent from the setup hook")
    user_hook = os.environ.get("RAYSLEUTH_SETUP_HOOK")
    if user_hook:
        _call_user_hook(user_hook)
