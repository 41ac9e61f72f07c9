"""Tensor summaries (raysleuth/model/tensors.py) of real numpy arrays and torch CPU tensors:
shape, dtype, statistics, NaN/Inf counts, the content hash; collections one row per entry;
numbers; the summary text that replaces a tensor's repr. torch only where it is installed."""

from __future__ import annotations

import importlib.util
import math
import subprocess
import sys

import numpy as np
import pytest

from raysleuth.model import tensor_math, tensors
from raysleuth.model.tensor_math import HASH_COLUMNS
from raysleuth.model.tensors import nothing_to_summarize, summarize, summary, tensor_text

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")


@pytest.fixture(autouse=True, scope="module")
def torch_cache_in_a_tmp_dir(tmp_path_factory):
    """torch keeps a compile cache in /tmp/torchinductor_<user> unless told: no folder left in /tmp."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path_factory.mktemp("torchinductor")))
        yield


def close(a, b, rel=1e-5):
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-9)


def test_numpy_array_statistics_match_numpys_own():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((300, 70)).astype(np.float32)
    s = summary(a)
    assert (
        s["shape"] == [300, 70] and s["dtype"] == "float32" and s["device"] == "cpu" and s["numel"] == 21000
    )
    a64 = a.astype(np.float64)
    assert close(s["mean"], a64.mean(), 1e-4) and close(s["std"], a64.std(ddof=1), 1e-4)
    assert s["min"] == float(a.min()) and s["max"] == float(a.max())
    assert close(s["norm"], float(np.linalg.norm(a64)), 1e-5)
    assert s["nan"] == 0 and s["inf"] == 0 and len(s["hash"]) == 16


def test_hash_is_equal_for_equal_data_and_differs_for_one_changed_element():
    a = np.arange(100_003, dtype=np.float32) / 7  # XXH3 of the bytes: no word boundary to meet
    b = a.copy()
    assert summary(a)["hash"] == summary(b)["hash"]
    for i in (0, 4096, 50_000, 100_002):
        c = a.copy()
        c[i] = np.nextafter(c[i], np.float32(np.inf))  # one ulp
        assert summary(c)["hash"] != summary(a)["hash"], i
    swapped = a.copy()
    swapped[[3, 4]] = swapped[[4, 3]]  # same values, other order
    assert summary(swapped)["hash"] != summary(a)["hash"]
    assert (
        summary(a.reshape(7, -1) if a.size % 7 == 0 else a[:-1].reshape(2, -1))["hash"] != summary(a)["hash"]
    )


def test_nan_and_inf_are_counted_and_the_statistics_are_of_the_finite_values():
    a = np.array([1.0, np.nan, np.inf, -np.inf, 3.0, np.nan], dtype=np.float32)
    s = summary(a)
    assert (s["nan"], s["inf"]) == (2, 2)
    assert (s["mean"], s["min"], s["max"]) == (2.0, 1.0, 3.0)
    assert close(s["norm"], math.sqrt(10))


@pytest.mark.parametrize("lib", ["numpy", pytest.param("torch", marks=needs_torch)])
def test_without_extremes_a_summary_is_the_same_but_min_and_max(lib):
    """What a divergence watch takes at every pass: two passes fewer, the same comparison."""
    a = np.random.default_rng(3).standard_normal(10_000).astype(np.float32)
    a[7] = np.nan
    value = a if lib == "numpy" else __import__("torch").from_numpy(a)
    full, lean = summary(value), summary(value, extremes=False)
    assert (lean["min"], lean["max"]) == (None, None) and full["min"] is not None
    assert {k: v for k, v in lean.items() if k not in ("min", "max")} == {
        k: v for k, v in full.items() if k not in ("min", "max")
    }
    assert lean["nan"] == 1


def test_integer_bool_empty_and_mean_dominated_arrays():
    s = summary(np.arange(10, dtype=np.int64))
    assert (s["dtype"], s["mean"], s["min"], s["max"]) == ("int64", 4.5, 0.0, 9.0)
    assert summary(np.array([True, False, True]))["mean"] == pytest.approx(2 / 3)
    empty = summary(np.zeros((0, 3), dtype=np.float32))
    assert empty["shape"] == [0, 3] and empty["mean"] is None and empty["norm"] == 0.0
    # The one-pass variance would lose every digit here; the summary notices and recomputes.
    a = (1e4 + np.random.default_rng(1).standard_normal(1000) * 1e-2).astype(np.float64)
    assert close(summary(a)["std"], float(a.std(ddof=1)), 1e-6)


def test_numbers_are_summaries_too():
    s = summary(2.5)
    assert (s["shape"], s["dtype"], s["mean"], s["std"], s["norm"]) == ([], "float", 2.5, 0.0, 2.5)
    assert summary(float("nan"))["nan"] == 1 and summary(float("nan"))["mean"] is None
    assert summary(3)["hash"] == summary(3)["hash"] != summary(4)["hash"]


def test_a_dict_gives_one_row_per_entry_and_a_string_gives_nothing():
    rows = summarize("opt", {"step": 3, "state": {"w": np.ones(4), "b": np.zeros(2)}, "name": "adam"})
    assert [r["name"] for r in rows] == ["opt.step", "opt.state.w", "opt.state.b"]
    assert nothing_to_summarize(summarize("s", "hello"))
    assert not nothing_to_summarize(rows)


def test_the_number_of_entries_is_bounded(monkeypatch):
    monkeypatch.setattr(tensors, "MAX_ENTRIES", 5)
    rows = summarize("many", [np.ones(2)] * 12)
    assert len(rows) == 5 and rows[-1]["more"] == 7


def test_an_array_is_shown_by_its_summary_never_its_numbers():
    text = tensor_text(np.ones((3, 4)))
    assert text == "ndarray[3, 4] float64 norm=3.5e+00 nan=0"
    assert tensor_text([1, 2]) is None and tensor_text("x") is None


def test_the_module_imports_neither_torch_nor_numpy():
    code = (
        "import sys; from raysleuth.model import tensors; "
        "print(tensors.summarize('x', [1.0, 2]), 'torch' in sys.modules, 'numpy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().endswith("False False")


@needs_torch
def test_torch_tensor_statistics_and_the_same_hash_as_numpy():
    import torch

    torch.manual_seed(0)
    t = torch.randn(1000, 37)
    s = summary(t)
    assert s["shape"] == [1000, 37] and s["dtype"] == "float32" and s["device"] == "cpu"
    assert close(s["mean"], t.double().mean().item(), 1e-4) and close(s["std"], t.double().std().item(), 1e-4)
    assert (s["min"], s["max"]) == (t.min().item(), t.max().item())
    assert close(s["norm"], torch.linalg.vector_norm(t.double()).item(), 1e-5)
    assert s["hash"] == summary(t.numpy())["hash"]  # same bits, same hash, whichever library
    u = t.clone()
    u[500, 3] += 1e-3
    assert summary(u)["hash"] != s["hash"]


@needs_torch
def test_torch_odd_tensors_grad_views_halves_nan_and_meta():
    import torch

    w = torch.randn(8, 8, requires_grad=True)
    assert summary(w)["numel"] == 64  # no autograd error, no graph
    view = torch.arange(20.0).reshape(4, 5)[:, 1::2]  # not contiguous, storage offset 1
    assert summary(view)["hash"] == summary(view.contiguous())["hash"]
    assert summary(view)["max"] == 18.0
    h = summary(torch.ones(4, dtype=torch.bfloat16))
    assert h["dtype"] == "bfloat16" and h["norm"] == 2.0
    n = summary(torch.tensor([1.0, float("nan"), float("inf")]))
    assert (n["nan"], n["inf"], n["max"]) == (1, 1, 1.0)
    z = torch.randn(5, dtype=torch.complex64)
    assert summary(z.conj())["hash"] == summary(z.conj().resolve_conj())["hash"] != summary(z)["hash"]
    meta = summary(torch.empty(3, device="meta"))
    assert meta["shape"] == [3] and meta["device"] == "meta" and "error" in meta


@needs_torch
def test_module_parameters_state_dict_and_optimizer_state_one_row_per_entry():
    import torch

    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    assert [r["name"] for r in summarize("m", model)] == ["m.0.weight", "m.0.bias", "m.2.weight", "m.2.bias"]
    assert [r["name"] for r in summarize("p", model.parameters())] == [f"p[{i}]" for i in range(4)]
    assert [r["name"] for r in summarize("p", model.named_parameters())][0] == "p.0.weight"
    opt = torch.optim.Adam(model.parameters())
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
    names = [r["name"] for r in summarize("opt", opt)]
    assert "opt.state.0.exp_avg" in names and "opt.param_groups[0].lr" in names


@needs_torch
def test_tensor_text_is_the_summary_line():
    import torch

    t = torch.full((1024, 4096), 1e-3)
    assert tensor_text(t) == "Tensor[1024, 4096] float32 cpu norm=2.0e+00 nan=0"
    t[0, 0] = float("inf")
    assert tensor_text(t).endswith("nan=0 inf=1")


@needs_torch
def test_a_dtensor_is_summarized_by_its_local_shard_without_a_collective():
    from helpers import run_probe

    out = run_probe(
        "import json, torch, torch.distributed as dist\n"
        "dist.init_process_group('gloo', rank=0, world_size=1, store=dist.HashStore())\n"
        "from torch.distributed.device_mesh import init_device_mesh\n"
        "from torch.distributed.tensor import Shard, distribute_tensor\n"
        "d = distribute_tensor(torch.arange(12.0).reshape(3, 4), init_device_mesh('cpu', (1,)), [Shard(0)])\n"
        "from raysleuth.model.tensors import summary\n"
        "print(json.dumps(summary(d)))\n"
        "dist.destroy_process_group()\n"
    )
    assert out["local"] is True and out["global_shape"] == [3, 4] and out["max"] == 11.0
    assert len(out["hash"]) == 16


@needs_torch
def test_torch_and_numpy_hash_alike_for_odd_sizes_views_and_small_dtypes():
    import torch

    torch.manual_seed(1)
    for t in (
        torch.randn(100_003),  # a 4-byte tail after the 64-bit words
        torch.randn(5),
        torch.ones(3, dtype=torch.bool),
        torch.arange(7, dtype=torch.int16),
        torch.randn(3, 5)[:, 1:3],  # a view: hashed as its contiguous copy
    ):
        assert summary(t)["hash"] == summary(t.numpy())["hash"], t.dtype


@needs_torch
def test_a_device_hash_is_exact_and_order_sensitive_and_not_the_host_hash():
    import torch

    def device_hash(t):
        return tensor_math._device_hash(torch, t.reshape(-1), "float32", list(t.shape))

    a = torch.arange(100_003, dtype=torch.float32) / 7  # words in rows of HASH_COLUMNS, a remainder, a tail
    assert device_hash(a) == device_hash(a.clone()) and device_hash(a) != summary(a)["hash"]
    for i in (0, 4096, 50_000, 100_002):
        c = a.clone()
        c[i] = torch.nextafter(c[i], torch.tensor(float("inf")))  # one ulp
        assert device_hash(c) != device_hash(a), i
    column = 2 * HASH_COLUMNS  # float32 index of the word below word 0: same column, next row
    for pair in ([3, 4], [0, 1, column, column + 1]):
        moved = a.clone()
        moved[pair] = a[pair[len(pair) // 2 :] + pair[: len(pair) // 2]]
        assert device_hash(moved) != device_hash(a), pair


@needs_torch
def test_torch_rows_mix_alike_by_matrix_product_and_by_slices(monkeypatch):
    import torch

    monkeypatch.setattr(tensor_math, "HASH_CHUNK_WORDS", 7 * HASH_COLUMNS)  # many slices, a short last one
    words = torch.randint(-(2**63), 2**63 - 1, (3000, HASH_COLUMNS), dtype=torch.int64)
    weights = torch.randint(-(2**63), 2**63 - 1, (HASH_COLUMNS,), dtype=torch.int64) | 1
    by_mv = tensor_math._torch_row_mix(torch, words, weights, matmul=True)
    by_slices = tensor_math._torch_row_mix(torch, words, weights, matmul=False)  # the GPU's way
    assert torch.equal(by_mv, by_slices) and by_mv.shape == (3000,)


def test_a_large_array_is_summarized_in_slices_with_the_same_numbers():
    a = np.random.default_rng(3).standard_normal(1_500_003).astype(np.float32) + 0.5  # rest words and a tail
    assert tensor_math._fusable(np, a) and tensor_math._numpy_fused(np, a, True, [a.size]) is not None
    s = summary(a.reshape(3, -1) if a.size % 3 == 0 else a)
    assert s["hash"] == tensor_math._numpy_hash(np, a, "float32", s["shape"])  # the one-pass hash's number
    exact = a.astype(np.float64)
    assert close(s["mean"], exact.mean()) and close(s["norm"], float(np.sqrt(exact @ exact)))
    assert close(s["std"], exact.std(ddof=1)) and (s["min"], s["max"]) == (float(a.min()), float(a.max()))
    one_ulp = a.copy()
    one_ulp[777_777] = np.nextafter(one_ulp[777_777], np.float32(np.inf))
    assert summary(one_ulp)["hash"] != summary(a)["hash"]
    a[10] = np.nan  # not finite: the separate passes count it
    s = summary(a)
    assert s["nan"] == 1 and s["hash"] == tensor_math._numpy_hash(np, a, "float32", s["shape"])


def test_without_xxhash_a_summary_keeps_its_statistics_and_says_why_it_has_no_hash(monkeypatch):
    from raysleuth.model.compare import flag_group

    monkeypatch.setitem(sys.modules, "xxhash", None)  # a worker whose environment lacks it
    a = np.random.default_rng(4).standard_normal(1_500_000).astype(np.float32)  # the sliced way
    rows = []
    for rank in range(4):
        b = a.copy()
        b[9] += 1e-3 if rank == 2 else 0.0
        rows.append(dict(summary(b), rank=rank))
    assert all(r["hash"] is None and "xxhash is not installed" in r["hash_error"] for r in rows)
    assert close(rows[0]["norm"], float(np.sqrt(a.astype(np.float64) @ a.astype(np.float64))))
    flag_group(rows, rtol=0.0)  # no hash to vote on: norm and mean decide
    assert [r["rank"] for r in rows if r["differs"]] == [2]
