"""One real local Ray cluster (agent on, auth off) and one real broker for this whole session."""

from __future__ import annotations

import os

import pytest
from helpers import local_cluster, pin_ray_env

pin_ray_env(auth_mode="disabled")  # before anything imports ray: it reads these at import
# The broker forgets ended workers' reports 20 s after Ray says they ended (60 s by default), so
# the fault test can see the registry shrink back.
os.environ.setdefault("RAYSLEUTH_FORGET_AFTER_S", "20")
# An evaluate in a paused worker is answered "still running" after 3 s (10 by default).
os.environ.setdefault("RAYSLEUTH_EVALUATE_BUDGET_S", "3")


@pytest.fixture(scope="session")
def ray_cluster():
    with local_cluster("rs-it-", num_cpus=8) as ctx:
        yield ctx
