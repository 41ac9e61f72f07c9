"""The timeouts that end a pause, as a paused worker reports them: Ray Train's health check and
torch.distributed's collective timeout (a real gloo group in a fresh process)."""

from __future__ import annotations

import pytest
from helpers import run_probe

from raysleuth.agent.deadlines import TRAIN_DEFAULT_S, TRAIN_ENV, paused_deadlines


def test_a_plain_worker_has_none():
    assert paused_deadlines(None) == []


def test_a_ray_train_worker_has_the_health_check_from_its_env(monkeypatch):
    assert [d["seconds"] for d in paused_deadlines("ray.train")] == [TRAIN_DEFAULT_S]
    monkeypatch.setenv(TRAIN_ENV, "90")
    (d,) = paused_deadlines("ray.train")
    assert d["seconds"] == 90.0 and TRAIN_ENV in d["setting"] and "health check" in d["what"]
    monkeypatch.setenv(TRAIN_ENV, "soon")
    assert paused_deadlines("ray.train")[0]["seconds"] == TRAIN_DEFAULT_S


PROBE = """
import datetime, json, os, socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
from raysleuth.agent.deadlines import paused_deadlines
before = paused_deadlines(None)
import torch.distributed as dist
dist.init_process_group("gloo", rank=0, world_size=1, timeout=datetime.timedelta(seconds=123))
print(json.dumps({"before": before, "after": paused_deadlines(None)}))
dist.destroy_process_group()
"""


def test_a_torch_distributed_worker_has_its_process_groups_timeout():
    pytest.importorskip("torch", reason="torch is installed in the 3.11 venv only")
    res = run_probe(PROBE, timeout=120)
    assert res["before"] == []
    (d,) = res["after"]
    assert d["seconds"] == 123.0 and "gloo" in d["what"] and "timeout" in d["setting"]
