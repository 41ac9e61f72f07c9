"""One real local Ray cluster (agent on, auth off) and one real broker for this whole session."""

from __future__ import annotations

import pytest
from helpers import local_cluster, pin_ray_env

from raysleuth.broker.process import start_broker
from raysleuth.client import BrokerClient

pin_ray_env(auth_mode="disabled")  # before anything imports ray: it reads these at import


@pytest.fixture(scope="session")
def ray_cluster():
    with local_cluster("rs-it-", num_cpus=8) as ctx:
        yield ctx


@pytest.fixture(scope="session")
def broker(ray_cluster, tmp_path_factory):
    b = start_broker(tmp_path_factory.mktemp("state"), address=ray_cluster.address_info["gcs_address"])
    yield b
    assert b.stop() == 0


@pytest.fixture(scope="session")
def client(broker):
    return BrokerClient(broker.http, broker.token)
