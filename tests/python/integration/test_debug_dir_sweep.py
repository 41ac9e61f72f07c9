"""A killed worker's debugger folder goes with it (#37): the agent's debugpy socket folder is
`rs-dbg-<pid>-<random>` (0700), and the node's relay removes it once that pid is gone. A real
cluster, broker, relay actor and a worker killed with SIGKILL (no atexit runs)."""

from __future__ import annotations

import os
import signal

import psutil
import ranked_job
import ray
from helpers import FIXTURES, dap_address, marker_line, stopped_frames, wait_until

from raysleuth.dap.client import open_session
from raysleuth.shared import names
from raysleuth.shared.paths import debug_dir_pid

JOB = str(FIXTURES / "ranked_job.py")
STEP_LINE = marker_line(JOB, "step-loop")


def debugger_folder(pid: int) -> str:
    """The folder of the AF_UNIX socket the worker's debugpy listens on."""
    conns = psutil.Process(pid).net_connections(kind="unix")
    (path,) = {c.laddr for c in conns if isinstance(c.laddr, str) and "rs-dbg-" in c.laddr}
    return os.path.dirname(path)


def node_relay():
    node_id = ray.get_runtime_context().get_node_id()
    found: list = []

    def started() -> bool:
        try:
            found.append(ray.get_actor(f"raysleuth-relay-{node_id[:16]}", namespace=names.NAMESPACE))
        except ValueError:
            return False
        return True

    wait_until(started, 60, message="the node's relay started")
    return found[-1]


async def test_a_killed_workers_debugger_folder_is_swept_by_the_nodes_relay(broker, client):
    cls = ray.remote(num_cpus=1)(ranked_job.RankedTrainer)
    actor = cls.remote(310, 1)
    pid = ray.get(actor.pid.remote())
    listed = lambda: any(w["pid"] == pid and w["rank"] == 310 for w in client.workers())  # noqa: E731
    wait_until(listed, 15, message="rank 310 listed")
    host, port = dap_address(broker)
    points = {JOB: [{"line": STEP_LINE}]}
    s = await open_session(host, port, {"token": broker.token, "rank": 310}, breakpoints=points)
    try:
        actor.step.remote(2)
        await stopped_frames(s)
        folder = debugger_folder(pid)
        assert debug_dir_pid(os.path.basename(folder)) == pid, folder
        assert os.stat(folder).st_mode & 0o777 == 0o700
        relay = node_relay()
        assert folder not in ray.get(relay.sweep_debug_dirs.remote())  # its worker lives: kept
        assert os.path.isdir(folder)
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: not psutil.pid_exists(pid), 15, message=f"pid {pid} gone")
        assert os.path.isdir(folder)  # a killed worker runs no atexit: the folder stays behind
        swept = ray.get(relay.sweep_debug_dirs.remote())
        assert folder in swept or not os.path.exists(folder), swept  # (or its own timer was first)
        assert not os.path.exists(folder)
    finally:
        await s.close()
        ray.kill(actor)
