"""Helpers shared by the Python test suites: waiting on conditions and Ray cluster settings."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"


def wait_until(condition, timeout: float, interval: float = 0.1, message: str = "condition"):
    """Poll `condition()` until it returns a truthy value; fail with its last value on timeout."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        last = condition()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {message}; last: {last!r}")
        time.sleep(interval)


def live_worker(client, pid: int, timeout: float = 15, **fields) -> dict:
    """The live worker with `pid` (and `fields`, e.g. agent=True, rank=3), once the broker lists
    it so. Later lookups of an ended worker or of its crash record go by its id: pids are reused
    (32768 here), and an ended worker of an earlier test may have had the same one."""

    def found():
        for w in client.workers():
            if w["pid"] == pid and w["state"] != "exited" and all(w.get(k) == v for k, v in fields.items()):
                return w
        return None

    return wait_until(found, timeout, message=f"a live worker with pid {pid} listed with {fields}")


def live_worker_id(client, pid: int, timeout: float = 15, **fields) -> str:
    return live_worker(client, pid, timeout, **fields)["id"]


async def stopped_frames(session, timeout: float = 30) -> tuple[int, list[dict]]:
    """Waits for a DAP session's next `stopped` event: (its thread id, that thread's stack frames)."""
    stopped = await session.wait_event("stopped", timeout=timeout)
    tid = stopped["body"]["threadId"]
    return tid, (await session.request("stackTrace", {"threadId": tid}))["body"]["stackFrames"]


def pin_ray_env(auth_mode: str = "disabled") -> None:
    """Loopback only, an explicit auth mode, and the agent on in every worker this cluster starts."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    os.environ["RAY_AUTH_MODE"] = auth_mode
    os.environ["RAYSLEUTH"] = "1"
    os.environ["RAY_DEDUP_LOGS"] = "0"
    paths = [str(FIXTURES)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))


def short_temp_dir(prefix: str) -> str:
    """Ray's socket paths must stay under 107 bytes: keep its temp dir short."""
    return tempfile.mkdtemp(prefix=prefix, dir="/tmp")


@contextlib.contextmanager
def ray_tmpdir(path: str):
    """Ray's default temp dir (`$RAY_TMPDIR/ray`) for what runs inside: `ray.cluster_utils.Cluster`
    writes the cluster's address to `<it>/ray_current_cluster` and fails where that folder does
    not exist (a fresh machine has no /tmp/ray); ours exists, and no other user's Ray reads it."""
    os.makedirs(os.path.join(path, "ray"), mode=0o700, exist_ok=True)
    old = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = path
    try:
        yield path
    finally:
        if old is None:
            os.environ.pop("RAY_TMPDIR", None)
        else:
            os.environ["RAY_TMPDIR"] = old


OTHERS_MAY_NOT_ENTER = "this checkout's folders are closed to other users (nobody cannot reach its Python)"


def others_may_enter(path: str) -> bool:
    """Whether another user (nobody, in the local-user tests) may pass through every folder above
    `path`: a checkout under a 0700 folder (`mktemp -d`) closes it to them."""
    folder = os.path.dirname(os.path.abspath(path))
    while True:
        if not os.stat(folder).st_mode & 0o001:
            return False
        parent = os.path.dirname(folder)
        if parent == folder:
            return True
        folder = parent


@contextlib.contextmanager
def local_multinode(prefix: str, extra_nodes: int):
    """A `ray.cluster_utils.Cluster` on loopback: a head with a dashboard of its own port and
    `extra_nodes` more nodes, one CPU each, with `ray.init` connected; shut down after, and its
    workers' logs scanned for fatal Ray checks. A free port can be taken by the head's own GCS
    before the dashboard binds it: the head is started again then (three tries)."""
    import ray
    from ray.cluster_utils import Cluster

    with ray_tmpdir(short_temp_dir(prefix)) as temp:
        for attempt in range(3):
            try:
                c = Cluster(
                    initialize_head=True,
                    head_node_args={
                        "num_cpus": 1,
                        "include_dashboard": True,
                        "node_ip_address": "127.0.0.1",
                        "temp_dir": temp,
                        "dashboard_port": free_port(),
                    },
                )
                break
            except ValueError as exc:
                if "already occupied" not in str(exc) or attempt == 2:
                    raise
        for _ in range(extra_nodes):
            c.add_node(num_cpus=1, node_ip_address="127.0.0.1")
        c.wait_for_nodes()
        ray.init(address=c.address, log_to_driver=False)
        try:
            yield c
        finally:
            sessions = [n.get_session_dir_path() for n in c.list_all_nodes()]
            ray.shutdown()
            c.shutdown()
    assert_no_fatal_checks(fatal_checks_in(*sessions))


def free_port() -> int:
    """A port nothing listens on now (for Ray components that take no port 0)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def marker_line(path, marker: str) -> int:
    """1-based line of the `# @bp <marker>` comment in a fixture file."""
    for i, line in enumerate(Path(path).read_text().splitlines(), 1):
        if f"# @bp {marker}" in line:
            return i
    raise AssertionError(f"no '# @bp {marker}' in {path}")


def dap_address(broker) -> tuple[str, int]:
    host, port = broker.ready["dap"].rsplit(":", 1)
    return host, int(port)


def broker_command(state_dir, address: str) -> list[str]:
    """`raysleuth broker` for one cluster, for tests that need the raw process."""
    import sys

    return [sys.executable, "-m", "raysleuth", "broker", "--state-dir", str(state_dir), "--address", address]


def broker_env() -> dict:
    """The test's environment for a broker child: the broker is never a Ray worker."""
    return {**os.environ, "RAYSLEUTH": "0"}


@contextlib.contextmanager
def local_cluster(prefix: str, num_cpus: int, system_config: dict | None = None):
    """A new embedded one-node Ray cluster on loopback in its own temp dir; shut down and removed after."""
    import shutil

    import ray

    temp = short_temp_dir(prefix)
    ctx = ray.init(
        address="local",
        num_cpus=num_cpus,
        include_dashboard=True,
        _temp_dir=temp,
        _node_ip_address="127.0.0.1",
        log_to_driver=False,
        **({"_system_config": system_config} if system_config else {}),
    )
    try:
        yield ctx
    finally:
        ray.shutdown()
        fatal = fatal_checks_in(ctx.address_info["session_dir"])
        if os.environ.get("RAYSLEUTH_KEEP_TEST_TEMP") != "1" and not fatal:  # kept to look into
            shutil.rmtree(temp, ignore_errors=True)
    assert_no_fatal_checks(fatal)


DELIBERATE_ABORTS: set[int] = set()
"""Pids of workers a test made Ray abort on purpose: their fatal checks are expected."""


def fatal_checks_in(*session_dirs: str) -> list[dict]:
    """Every fatal Ray check (`] C ` line) in the worker logs of these session folders, but for
    the workers in DELIBERATE_ABORTS."""
    from raysleuth.probes.logs import fatal_checks

    found = [f for d in dict.fromkeys(session_dirs) for f in fatal_checks(os.path.join(d, "logs"))]
    expected = tuple(s for pid in DELIBERATE_ABORTS for s in (f"-{pid}.err", f"_{pid}.log"))
    return [f for f in found if not f["file"].endswith(expected)] if expected else found


def assert_no_fatal_checks(found: list[dict]) -> None:
    """Fails a Ray test session in which Ray aborted a worker: the agent must never cause one."""
    where = "\n".join(f"  {f['file']}:{f['line']}: {f['check']}" for f in found)
    assert not found, f"Ray aborted {len(found)} worker(s) with a fatal check (logs kept):\n{where}"


def run_probe(code: str, timeout: float = 120) -> dict:
    """Run `code` in a fresh interpreter with no agent (RAYSLEUTH unset); the JSON object its last
    line of output prints."""
    env = {k: v for k, v in os.environ.items() if k != "RAYSLEUTH"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env, check=False
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])
