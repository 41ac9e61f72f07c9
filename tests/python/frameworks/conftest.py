"""One real local Ray cluster (agent on, auth off) and one real broker for the framework tests:
Ray Train, Tune and Serve with their own APIs, and a verl-style worker group.

The job modules (`fw_*.py`) sit beside the tests and reach workers through PYTHONPATH, as a
user's project on a cluster would; breakpoints are set on their absolute paths.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import free_port, local_cluster, pin_ray_env

HERE = Path(__file__).resolve().parent

pin_ray_env(auth_mode="disabled")  # before anything imports ray: it reads these at import
os.environ["PYTHONPATH"] = os.pathsep.join(
    dict.fromkeys([str(HERE), *filter(None, os.environ["PYTHONPATH"].split(os.pathsep))])
)


@pytest.fixture(scope="session")
def ray_cluster():
    with local_cluster("rs-fw-", num_cpus=8) as ctx:
        yield ctx


@pytest.fixture(scope="module")
def serve_url(ray_cluster):
    """Ray Serve on loopback with the `fw_serve` app at /double; shut down after the module."""
    import fw_serve  # here, not at the top: ray is imported only after pin_ray_env
    from ray import serve

    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    serve.run(fw_serve.app, name="fw", route_prefix="/double")
    yield f"http://127.0.0.1:{port}/double"
    serve.shutdown()


@pytest.fixture
def clean_points(client):
    """No cluster breakpoint left over from another test, none left behind; nobody left paused."""
    client.delete("/v1/breakpoints")
    yield
    client.post("/v1/continue", {})
    client.delete("/v1/breakpoints")
