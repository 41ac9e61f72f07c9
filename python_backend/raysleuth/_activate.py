"""Entry point of the `raysleuth.pth` hook: runs at start-up of every Python process with RAYSLEUTH=1.

It must cost next to nothing and never fail: it only starts the agent in Ray worker processes
(never in raylets, dashboards, drivers or debugpy's helper processes).
"""

import sys


def _is_ray_worker(argv: list) -> bool:
    return bool(argv) and argv[0].replace("\\", "/").endswith("ray/_private/workers/default_worker.py")


try:
    if _is_ray_worker(sys.argv):
        from raysleuth.agent import start_when_connected

        start_when_connected(source="env")
except Exception:  # noqa: BLE001 - a start-up hook must never break the interpreter
    try:
        from raysleuth.agent.log import swallow

        swallow("activating the agent at start-up (RAYSLEUTH=1)")
    except Exception:  # noqa: BLE001 - not even the log: stay silent rather than break start-up
        pass
