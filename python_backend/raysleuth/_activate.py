"""Entry point of the `raysleuth.pth` hook: runs at start-up of every Python process with RAYSLEUTH=1.

It must cost next to nothing and never fail: it only starts the agent in Ray worker processes
(never in raylets, dashboards, drivers or debugpy's helper processes). On a Python or Ray outside
the tested matrix (`raysleuth.shared.versions`) it starts nothing and says so in one line on the worker's
stderr (Ray shows it in the driver's output and the worker's log), naming what to install.
"""

import sys


def _is_ray_worker(argv: list) -> bool:
    return bool(argv) and argv[0].replace("\\", "/").endswith("ray/_private/workers/default_worker.py")


def activate(argv: list, stderr=None) -> bool:
    """Start the agent if this is a Ray worker on a supported Python and Ray; True if it started."""
    if not _is_ray_worker(argv):
        return False
    from raysleuth.shared.versions import refusal, unsupported_message

    refused = unsupported_message()
    if refused:
        print(refusal(*refused), file=stderr or sys.stderr, flush=True)
        return False
    from raysleuth.agent import start_when_connected

    start_when_connected(source="env")
    return True


try:
    activate(sys.argv)
except Exception:  # noqa: BLE001 - a start-up hook must never break the interpreter
    try:
        from raysleuth.agent.log import swallow

        swallow("activating the agent at start-up (RAYSLEUTH=1)")
    except Exception:  # noqa: BLE001 - not even the log: stay silent rather than break start-up
        pass
