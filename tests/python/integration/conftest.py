"""One real local Ray cluster (agent on, auth off) and one real broker for this whole session."""

from __future__ import annotations

import shutil

import pytest
from helpers import pin_ray_env, short_temp_dir

from raysleuth.broker.process import start_broker
from raysleuth.client import BrokerClient

pin_ray_env(auth_mode="disabled")  # before anything imports ray: it reads these at import


@pytest.fixture(scope="session")
def ray_cluster():
    import ray

    temp = short_temp_dir("rs-it-")
    ctx = ray.init(
        address="local",
        num_cpus=8,
        include_dashboard=True,
        _temp_dir=temp,
        _node_ip_address="127.0.0.1",
        log_to_driver=False,
    )
    yield ctx
    ray.shutdown()
    shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture(scope="session")
def broker(ray_cluster, tmp_path_factory):
    b = start_broker(tmp_path_factory.mktemp("state"), address=ray_cluster.address_info["gcs_address"])
    yield b
    assert b.stop() == 0


@pytest.fixture(scope="session")
def client(broker):
    return BrokerClient(broker.http, broker.token)
