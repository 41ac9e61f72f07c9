"""CUDA memory at an out-of-memory error (raysleuth/probes/gpu.py, agent/postmortem.py): a real
torch.OutOfMemoryError raised and caught here, torch.cuda faked at its seam (fake_cuda, as on
a machine without a GPU), the record built by the agent's own code and read by the broker's."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from raysleuth.agent import postmortem
from raysleuth.broker.postmortem.crashes import hint_for
from raysleuth.model.crash import CrashRecord
from raysleuth.probes import gpu

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
GIB = 1 << 30


@pytest.fixture
def fake_cuda(monkeypatch):
    monkeypatch.setenv("RAYSLEUTH_TORCH_CUDA", "fake_cuda")


def caught(exc: BaseException):
    try:
        raise exc
    except BaseException:  # noqa: BLE001 - the point: what the post-mortem hook sees
        return sys.exc_info()


def test_torchs_oom_and_cudas_message_are_recognized_other_errors_not():
    import torch

    assert gpu.is_cuda_oom(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert gpu.is_cuda_oom(RuntimeError("CUDA error: out of memory"))
    try:
        try:
            raise torch.OutOfMemoryError("x")
        except torch.OutOfMemoryError as inner:
            raise ValueError("the step failed") from inner
    except ValueError as outer:
        assert gpu.is_cuda_oom(outer)
    assert not gpu.is_cuda_oom(MemoryError("host memory"))
    assert not gpu.is_cuda_oom(ZeroDivisionError("x"))


def test_evidence_keeps_the_summary_and_the_largest_live_blocks(fake_cuda):
    import torch

    ev = gpu.cuda_oom_evidence(torch.OutOfMemoryError("CUDA out of memory"))
    assert "PyTorch CUDA memory summary" in ev["summary"]
    assert (ev["allocated_bytes"], ev["reserved_bytes"]) == (70 * GIB, 78 * GIB)
    assert [b["bytes"] for b in ev["largest"][:3]] == [40 * GIB, 20 * GIB, 8 * GIB]
    assert len(ev["largest"]) == gpu.LARGEST and ev["largest"][0]["frames"] == ["/work/train.py:42 forward"]
    assert ev["tensors"] == []  # no CUDA tensor can exist on this machine
    assert gpu.cuda_oom_evidence(ValueError("x")) is None


def test_without_cuda_initialized_the_record_says_so(monkeypatch, fake_cuda):
    import fake_cuda as fc
    import torch

    monkeypatch.setattr(fc, "is_initialized", lambda: False)
    ev = gpu.cuda_oom_evidence(torch.OutOfMemoryError("CUDA out of memory"))
    assert ev["summary"] is None and "never initialized" in ev["error"]


class _Agent:
    """The agent seam build_record reads: who the worker is and its last events."""

    events: list = []

    def identity(self) -> dict:
        return {"rank": 3}


def test_the_crash_record_of_an_oom_carries_cuda_memory_and_a_hint_what_to_try(fake_cuda):
    import torch

    def step():
        activations = torch.ones(4, 4)  # noqa: F841 - a local the record shows as a summary
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")

    record = postmortem.build_record(_Agent(), caught_call(step))
    rec = CrashRecord.from_json(dict(record, id="20260101-000000-abcd"))
    detail = rec.to_json()
    assert detail["cuda_memory"]["largest"][0]["bytes"] == 40 * GIB
    assert detail["frames"][0]["locals"]["activations"] == "Tensor[4, 4] float32 cpu norm=4.0e+00 nan=0"
    hint = hint_for(rec)
    assert "expandable_segments" in hint and "micro-batch" in hint and "checkpoint" in hint
    assert "cuda_memory has" in hint and "cuda_memory has" not in hint_for(
        CrashRecord.from_json(dict(detail, cuda_memory=None))
    )
    other = postmortem.build_record(_Agent(), caught(ZeroDivisionError("x")))
    assert other["cuda_memory"] is None


def caught_call(fn):
    try:
        fn()
    except BaseException:  # noqa: BLE001
        return sys.exc_info()
    raise AssertionError("did not raise")
