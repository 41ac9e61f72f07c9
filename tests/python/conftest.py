"""Shared by every suite: the test helpers and fixtures on sys.path, and the broker fixtures of
the suites that share one cluster (each suite's conftest says which `ray_cluster` that is)."""

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[0] / "fixtures"))


@pytest.fixture(scope="session")
def broker(ray_cluster, tmp_path_factory):
    """One real broker on the suite's cluster, stopped (exit status 0) at the end."""
    from raysleuth.broker.process import start_broker

    b = start_broker(tmp_path_factory.mktemp("state"), address=ray_cluster.address_info["gcs_address"])
    yield b
    assert b.stop() == 0


@pytest.fixture(scope="session")
def client(broker):
    from raysleuth.client import BrokerClient

    return BrokerClient(broker.http, broker.token)


def pytest_sessionfinish(session, exitstatus):
    """Workers that Ray killed (ray.kill, the cluster's shutdown) run no atexit: the debugger
    folders (/tmp/rs-dbg-<pid>-*) of those that are gone by now are removed, as a node's relay
    would (#37)."""
    from raysleuth.shared.dbgdirs import sweep_debug_dirs

    sweep_debug_dirs()
