"""Summaries of tensors, arrays and numbers: the one place Ray Sleuth turns a value into numbers
that can be compared across ranks (`raysleuth.inspect`, snapshot expressions, evaluate rows,
logpoint text, crash locals).

Runs inside user code on the task's thread: it never imports torch or numpy (it uses them only
when the program already did: `sys.modules`), never logs or prints (a failure is the row's
`error`), and never copies a tensor's data to the host: every statistic is computed by the
tensor's own library on its own device, and only the numbers leave it.

Cost (bench/inspect_cost.py; the arithmetic is in tensor_math.py): about three passes over the
data for the statistics (sum, dot product, min/max) and one for the hash (XXH3 of the bytes in
host memory; on a device, weighted sums of the raw 64-bit words there): a 10M-element float32
CPU tensor took 5.2 ms here with one torch thread against 1.3 ms for one
`torch.linalg.vector_norm` (4x), a numpy array 4.1 ms against 1.0 for `np.linalg.norm`. NaN/Inf are
counted, and the standard deviation recomputed, only when the cheap passes say they must be;
integer and bool data are summed through a float64 copy. A collection (a state_dict,
`model.parameters()`, an optimizer's state) gives one row per entry, at most MAX_ENTRIES: a
100-tensor state_dict of 3.3M numbers took 6 ms.
"""

from __future__ import annotations

import collections.abc
import sys
import types

from raysleuth.model.tensor_math import describe, number_summary, numpy_summary, torch_summary

MAX_ENTRIES = 512
"""Rows one value may give (a state_dict's entries); the rest are counted, not summarized."""

MAX_DEPTH = 6
"""How deep nested dicts and lists are walked for entries."""

TEXT_MAX_HOST_ELEMENTS = 1 << 24
"""Past this many elements in host memory, `tensor_text` (crash locals, snapshot and evaluate
reprs) gives shape and dtype only: statistics of a 1 GB uint8 array took 18 s here and a
float64 copy of 8 GB, inside a capture that allows 200 ms a value. `summary` itself has no bound."""

# --- what a value is ---------------------------------------------------------------------------


# type(), not isinstance(): isinstance reads `__class__`, which a proxy object may compute
# (and warn on stderr about, as torch.distributed.reduce_op does).


def _torch_tensor(value) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and issubclass(type(value), torch.Tensor)


def _numpy_array(value) -> bool:
    np = sys.modules.get("numpy")
    return np is not None and issubclass(type(value), (np.ndarray, np.generic))


def is_tensor_like(value) -> bool:
    """A torch tensor or a numpy array (or numpy scalar)."""
    return _torch_tensor(value) or _numpy_array(value)


def _number(value) -> bool:
    return isinstance(value, (int, float))


# --- one leaf ----------------------------------------------------------------------------------


def summary(value, with_hash: bool = True, extremes: bool = True) -> dict:
    """{shape, dtype, device, numel, mean, std, min, max, norm, nan, inf, hash} of one tensor,
    array or number; `error` (and no statistics) when the library could not compute them.
    Without `extremes`, min and max are None: two passes fewer over a numpy array, one over a
    tensor (a divergence watch, which compares by hash, norm and mean, at every pass)."""
    try:
        if _torch_tensor(value):
            return torch_summary(value, with_hash, extremes)
        if _numpy_array(value):
            return numpy_summary(value, with_hash, extremes)
        if _number(value):
            return number_summary(value, with_hash)
    except Exception as exc:  # noqa: BLE001 - an odd tensor (meta, sparse, fp8): say so in the row
        out = describe(value)
        out["error"] = f"{type(exc).__name__}: {exc}"[:300]
        return out
    return {"shape": None, "dtype": type(value).__name__, "device": None, "error": "not a tensor or a number"}


# --- collections -------------------------------------------------------------------------------


def _leaf(value) -> bool:
    return is_tensor_like(value) or _number(value)


def _expand(value):
    """What a module or an optimizer stands for: its state_dict."""
    torch = sys.modules.get("torch")
    if torch is not None:
        if isinstance(value, torch.nn.Module):
            return value.state_dict()
        if isinstance(value, torch.optim.Optimizer):
            return value.state_dict()
    return value


_WALKED = (list, tuple, types.GeneratorType, collections.abc.KeysView, collections.abc.ValuesView)


def _entries(name: str, value, depth: int, count: list[int]):
    """(entry name, leaf) pairs of `value`, at most MAX_ENTRIES; `count` is [given, left out]."""
    if depth >= MAX_DEPTH:
        return
    value = _expand(value)
    if isinstance(value, collections.abc.Mapping):
        items = ((f"{name}.{k}" if name else str(k), v) for k, v in value.items())
    elif isinstance(value, _WALKED):
        items = (
            (f"{name}.{v[0]}", v[1]) if isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str)
            else (f"{name}[{i}]", v)
            for i, v in enumerate(value)
        )  # fmt: skip
    else:
        return
    for sub, v in items:
        if count[0] >= MAX_ENTRIES:
            count[1] += 1
            if count[1] >= 10 * MAX_ENTRIES:  # an endless generator: stop counting too
                return
        elif _leaf(v):
            count[0] += 1
            yield sub, v
        else:
            yield from _entries(sub, v, depth + 1, count)


NOTHING = "no tensors, arrays or numbers in it"
"""The `error` of the one row of a value with nothing to summarize."""


def summarize(name: str, value, with_hash: bool = True, extremes: bool = True) -> list[dict]:
    """One row per entry of `value`: [{name, shape, dtype, device, numel, mean, ..., hash}].

    A tensor, array or number gives one row named `name`; a dict gives `name.key` rows, a list
    or `model.parameters()` `name[i]`, `named_parameters()` `name.weight`; a module or an
    optimizer its state_dict's. A value with nothing to summarize gives one row whose `error`
    is NOTHING. Past MAX_ENTRIES, the last row's `more` says how many entries were left out.
    """
    if _leaf(value):
        return [dict(name=name, **summary(value, with_hash, extremes))]
    count = [0, 0]
    try:
        rows = [dict(name=n, **summary(v, with_hash, extremes)) for n, v in _entries(name, value, 0, count)]
    except Exception as exc:  # noqa: BLE001 - a collection that fails while walked: say so
        return [{"name": name, "dtype": type(value).__name__, "error": f"{type(exc).__name__}: {exc}"[:300]}]
    if not rows:
        return [{"name": name, "dtype": type(value).__name__, "error": NOTHING}]
    if count[1]:
        rows[-1]["more"] = count[1]
    return rows


def nothing_to_summarize(rows: list[dict]) -> bool:
    """`summarize` found no tensor, array or number in the value."""
    return len(rows) == 1 and rows[0].get("error") == NOTHING


# --- text --------------------------------------------------------------------------------------


def text_of(s: dict, kind: str = "Tensor") -> str:
    """`Tensor[1024, 4096] float32 cuda:0 norm=3.2e+01 nan=0` for a summary."""
    shape = ", ".join(str(d) for d in s.get("shape") or [])
    head = f"{kind}[{shape}] {s.get('dtype')}" + (
        f" {s['device']}" if kind == "Tensor" and s.get("device") else ""
    )
    if s.get("error"):
        return f"{head} <{s['error']}>"
    norm = s.get("norm")
    out = f"{head} norm={norm:.1e}" if isinstance(norm, float) else f"{head} norm={norm}"
    out += f" nan={s.get('nan', 0)}"
    if s.get("inf"):
        out += f" inf={s['inf']}"
    return out


def tensor_text(value) -> str | None:
    """The summary text of a torch tensor or numpy array (None for anything else), never its
    numbers. Numpy scalars are numbers: None too (their repr is short)."""
    if _torch_tensor(value):
        return text_of(_text_summary(value, on_host=getattr(value.device, "type", "cpu") == "cpu"))
    np = sys.modules.get("numpy")
    if np is not None and issubclass(type(value), np.ndarray):
        return text_of(_text_summary(value, on_host=True), kind="ndarray")
    return None


def _text_summary(value, on_host: bool) -> dict:
    try:
        n = int(value.numel() if _torch_tensor(value) else value.size)
    except Exception:  # noqa: BLE001 - an odd tensor: summary() says what is wrong with it
        n = 0
    if on_host and n > TEXT_MAX_HOST_ELEMENTS:
        return dict(describe(value), error=f"{n:,} elements: too many to summarize here")
    return summary(value, with_hash=False)
