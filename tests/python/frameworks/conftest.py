"""One real local Ray cluster (agent on, auth off) and one real broker for the framework tests:
Ray Train, Tune and Serve with their own APIs, and verl 0.9.1's single controller on CPU (worker
groups on a `RayResourcePool(use_gpu=False)`, colocated and fused role classes).

The job modules (`fw_*.py`) sit beside the tests and reach workers through PYTHONPATH, as a
user's project on a cluster would; breakpoints are set on their absolute paths.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future
from pathlib import Path

import pytest
from helpers import assert_no_fatal_checks, fatal_checks_in, free_port, local_cluster, pin_ray_env

HERE = Path(__file__).resolve().parent

pin_ray_env(auth_mode="disabled")  # before anything imports ray: it reads these at import
os.environ["PYTHONPATH"] = os.pathsep.join(
    dict.fromkeys([str(HERE), *filter(None, os.environ["PYTHONPATH"].split(os.pathsep))])
)


@pytest.fixture(scope="session")
def ray_cluster():
    # 8 CPUs for the verl groups' placement groups (one CPU a rank: 4 + 2 + 2), 4 for the rest.
    with local_cluster("rs-fw-", num_cpus=12) as ctx:
        yield ctx


@pytest.fixture(scope="module")
def verl_groups(ray_cluster):
    """make(cls, ranks, name_prefix, **kwargs) -> a real verl `RayWorkerGroup` of `ranks` workers
    of `cls` (a `RayClassWithInitArgs`) on its own CPU resource pool (one CPU a rank: verl's
    default of 10 a bundle would not fit). At the end of the module each group's workers are
    killed and its placement groups removed, and the cluster's worker logs must hold no fatal
    Ray check (`Check failed`) so far."""
    import ray
    from verl.single_controller.ray import RayResourcePool, RayWorkerGroup

    made = []

    def make(cls, ranks: int, name_prefix: str, **kwargs):
        pool = RayResourcePool([ranks], use_gpu=False, max_colocate_count=1, name_prefix=name_prefix)
        wg = RayWorkerGroup(resource_pool=pool, ray_cls_with_init=cls, name_prefix=name_prefix, **kwargs)
        made.append((wg, pool))
        return wg

    yield make
    for wg, _ in made:
        for w in wg.workers:
            ray.kill(w)
    # Their CPUs back for the next module; bounded: once, a loaded machine kept this call waiting
    # for minutes, and the next module's groups fit beside a group left placed anyway.
    pgs = [pg for _, pool in made for pg in pool.pgs or []]
    remover = threading.Thread(
        target=lambda: [ray.util.remove_placement_group(pg) for pg in pgs], daemon=True
    )
    remover.start()
    remover.join(30)
    assert_no_fatal_checks(fatal_checks_in(ray_cluster.address_info["session_dir"]))


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


class Driver:
    """The driver's blocking calls (verl's `wg.method(...)` waits for every rank) in daemon threads:
    `submit(fn, *args)` -> a Future. A call that a failed test left waiting on a paused rank
    holds up neither the test's teardown nor the interpreter's exit."""

    def submit(self, fn, *args) -> Future:
        fut: Future = Future()

        def run() -> None:
            try:
                fut.set_result(fn(*args))
            except BaseException as exc:  # noqa: BLE001 - handed to the test through the future
                fut.set_exception(exc)

        threading.Thread(target=run, daemon=True, name=f"driver-{getattr(fn, '__name__', 'call')}").start()
        return fut


@pytest.fixture
def driver():
    return Driver()


@pytest.fixture
def clean_points(client):
    """No cluster breakpoint left over from another test, none left behind; nobody left paused."""
    client.delete("/v1/breakpoints")
    yield
    client.post("/v1/continue", {})
    client.delete("/v1/breakpoints")
