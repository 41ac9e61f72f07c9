"""The arithmetic of a tensor summary: statistics and the content hash, computed by torch or
numpy on the value's own device (only the numbers leave it). Used through
raysleuth/model/tensors.py, which says what a value is; this module never imports torch or
numpy itself (each function gets the library the program already loaded) and never logs.

The hash of data in host memory (numpy arrays, torch CPU tensors) is XXH3-128 of the raw
bytes (the xxhash library), read once, in slices that the statistics then read from the cache.
A tensor on a device is hashed there, never copied off it: its raw bytes as 64-bit words in rows
of HASH_COLUMNS, each word times the odd weight of its column and the odd weight of its row,
summed in wrapping 64-bit integer arithmetic (one matrix-vector product), so only numbers leave
the device. Either hash changes when any bit or the order of values changes (the device's for
certain, XXH3's but for a 2^-128 chance); the same bits hash alike in either library, but a
host copy and a device tensor hash differently (a row's `device` says where it was). A
checksum, not cryptographic.
"""

from __future__ import annotations

import hashlib
import math

HASH_COLUMNS = 512
"""A device's hash views the raw data as 64-bit words in rows of this many (the fastest width for
the weighted row sums of 40 MB measured with torch on this machine's CPU: 3.2 ms)."""

FUSED_CHUNK_BYTES = 1 << 21
"""A large contiguous float array is summarized in slices of this size, which stay in the cache:
the hash, the sum and the dot product of a slice read memory once, not three times. XXH3 of
40 MB: 0.7 ms from the cache, 1.0 from memory; the weighted sums it replaced took 2.1 (numpy)."""

FUSED_MIN_BYTES = 1 << 22
"""Arrays from this size on take the sliced way (below it the calls per slice cost more)."""

HASH_CHUNK_WORDS = 1 << 21
"""Off the CPU (no int64 matrix-vector product there) rows are weighted in slices of this many words."""

_GOLDEN = 0x9E3779B97F4A7C15
_HOST_HASH = "xxh3-128"
_MASK = (1 << 64) - 1
_weights_cache: dict = {}
"""The hash's position weights per (length, salt, library, device): at most 64 vectors, the
longest as long as a tensor's rows of HASH_COLUMNS words (1/512 of its size)."""


def describe(value) -> dict:
    try:
        shape = [int(d) for d in getattr(value, "shape", ())]
    except Exception:  # noqa: BLE001 - no readable shape
        shape = None
    dtype = getattr(value, "dtype", None)
    dev = getattr(value, "device", None)
    return {
        "shape": shape,
        "dtype": _dtype_name(dtype) if dtype is not None else type(value).__name__,
        "device": str(dev) if dev is not None else None,
    }


def _dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def _finite(x):
    """JSON has no NaN or Infinity: such a statistic is None."""
    return x if isinstance(x, float) and math.isfinite(x) else (x if isinstance(x, int) else None)


def _stats(n: int, s: float, sumsq: float, mn: float | None, mx: float | None, std=None) -> dict:
    mean = s / n
    if std is None:
        var = (sumsq - n * mean * mean) / (n - 1) if n > 1 else 0.0
        std = math.sqrt(var) if var > 0 else 0.0
    return {
        "mean": _finite(float(mean)),
        "std": _finite(float(std)),
        "min": None if mn is None else _finite(float(mn)),
        "max": None if mx is None else _finite(float(mx)),
        "norm": _finite(math.sqrt(sumsq)) if sumsq >= 0 else None,
    }


def _cancels(n: int, s: float, sumsq: float) -> bool:
    """The one-pass variance lost its digits (the mean dwarfs the spread): compute it again."""
    if n < 2 or sumsq <= 0:
        return False
    return sumsq - s * s / n < 1e-2 * sumsq


def number_summary(value, with_hash: bool) -> dict:
    try:
        f = float(value)
    except OverflowError:
        f = math.inf if value > 0 else -math.inf
    nan, inf = int(math.isnan(f)), int(math.isinf(f))
    out: dict = {"shape": [], "dtype": type(value).__name__, "device": None, "numel": 1}
    if nan or inf:
        out.update(mean=None, std=None, min=None, max=None, norm=None)
    else:
        out.update(mean=f, std=0.0, min=f, max=f, norm=abs(f))
    out.update(nan=nan, inf=inf)
    if with_hash:
        out["hash"] = _digest(f"num|{type(value).__name__}|{value!r}")
    return out


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def _mix_weights(length: int, salt: int, make):
    """Odd 64-bit weights for positions 0..length-1 (cached per length, salt and library)."""
    key = (length, salt, make.__name__, getattr(make, "device", None))
    w = _weights_cache.get(key)
    if w is None:
        if len(_weights_cache) > 64:
            _weights_cache.clear()
        w = make(length, salt)
        _weights_cache[key] = w
    return w


def _hash_text(dtype: str, shape, parts: list[int], tail: bytes) -> str:
    return _digest(f"{dtype}|{list(shape)}|{'|'.join(str(p & _MASK) for p in parts)}|{tail.hex()}")


def _host_hash_text(dtype: str, shape, digest: int) -> str:
    """The hash of bytes in host memory, from their XXH3-128 digest."""
    return _digest(f"{_HOST_HASH}|{dtype}|{list(shape)}|{digest}")


def _xxhash():
    """The xxhash module; None where the worker's environment lacks it (a runtime_env of its own)."""
    try:
        import xxhash
    except ImportError:
        return None
    return xxhash


def _host_hash(dtype: str, shape, data) -> str:
    """`data`: a C-contiguous buffer of the raw bytes (a numpy uint8 array)."""
    xxhash = _xxhash()
    if xxhash is None:
        raise ModuleNotFoundError("no content hash: xxhash is not installed where this worker runs")
    return _host_hash_text(dtype, shape, xxhash.xxh3_128_intdigest(data))


# --- torch -------------------------------------------------------------------------------------


def torch_summary(t, with_hash: bool, extremes: bool = True) -> dict:
    import torch  # already imported by the program: _torch_tensor said so

    out = describe(t)
    if type(t).__name__ == "DTensor" and hasattr(t, "to_local"):
        # A distributed tensor's own reductions are collectives (a hang if this rank alone
        # asks): summarize this rank's shard, which is what differs between ranks anyway.
        out["global_shape"] = out["shape"]
        t = t.to_local()
        out.update(shape=[int(d) for d in t.shape], local=True)
    with torch.no_grad():
        x = t.detach()
        n = x.numel()
        out["numel"] = int(n)
        if x.is_sparse or x.layout != torch.strided:
            x = x.to_dense()
        flat = x.reshape(-1)
        if n == 0:
            out.update(mean=None, std=None, min=None, max=None, norm=0.0, nan=0, inf=0)
        elif x.is_complex():
            norm = float(torch.linalg.vector_norm(flat).item())
            out.update(mean=None, std=None, min=None, max=None, norm=_finite(norm), nan=0, inf=0)
            out["nan"] = int(torch.isnan(flat).sum().item())
            out["inf"] = int(torch.isinf(flat).sum().item())
        else:
            out.update(_torch_stats(torch, flat, n, extremes))
        if with_hash:
            try:
                out["hash"] = _torch_hash(torch, flat, out["dtype"], out["shape"])
            except Exception as exc:  # noqa: BLE001 - no 64-bit integer sums there, or no xxhash: stats only
                out["hash"] = None
                out["hash_error"] = f"{type(exc).__name__}: {exc}"[:200]
    return out


def _torch_stats(torch, flat, n: int, extremes: bool = True) -> dict:
    if not flat.is_floating_point():
        flat = flat.to(torch.float64)  # integers and bools: a float64 copy
    elif flat.dtype not in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        flat = flat.to(torch.float32)  # fp8 and friends have no reductions of their own
    acc = torch.float64 if flat.dtype == torch.float64 else torch.float32
    try:
        s, norm, mn, mx = _torch_reduce(torch, flat, acc, extremes)
    except RuntimeError:  # a reduction this dtype lacks on this device: through float32
        flat = flat.to(acc)
        s, norm, mn, mx = _torch_reduce(torch, flat, acc, extremes)
    nan = inf = 0
    if not _all_finite(s, norm, mn, mx):
        nan = int(torch.isnan(flat).sum().item())
        inf = int(torch.isinf(flat).sum().item())
        if nan or inf:
            flat = flat[torch.isfinite(flat)]  # statistics of the finite values (a copy: rare)
            n = flat.numel()
        if n == 0:
            return {"mean": None, "std": None, "min": None, "max": None, "norm": None, "nan": nan, "inf": inf}
        s, norm, mn, mx = _torch_reduce(torch, flat, torch.float64, extremes)  # overflowed in float32
    sumsq = norm * norm
    std = float(flat.to(acc).std().item()) if _cancels(n, s, sumsq) else None
    return dict(_stats(n, s, sumsq, mn, mx, std), nan=nan, inf=inf)


def _torch_reduce(torch, flat, acc, extremes: bool = True) -> list:
    """Sum, L2 norm, min, max (None without `extremes`) in one trip off the device (one sync).
    The norm comes from a dot product (BLAS): torch's float32 vector_norm drifts by 1e-4
    relative over 10M elements."""
    s = flat.sum(dtype=acc) if flat.dtype != acc else flat.sum()
    if flat.dtype == acc:
        sumsq = torch.dot(flat, flat)
    else:
        sumsq = torch.linalg.vector_norm(flat, dtype=acc) ** 2
    if not extremes:
        s, sumsq = torch.stack([s, sumsq]).tolist()
        return [s, math.sqrt(sumsq) if sumsq >= 0 else math.nan, None, None]
    mn, mx = torch.aminmax(flat)
    s, sumsq, mn, mx = torch.stack([s, sumsq, mn.to(acc), mx.to(acc)]).tolist()
    return [s, math.sqrt(sumsq) if sumsq >= 0 else math.nan, mn, mx]


def _all_finite(*values) -> bool:
    """No NaN or Inf among the statistics taken (None: not taken)."""
    return all(v is None or math.isfinite(v) for v in values)


def _torch_words(torch, x):
    """The tensor's bytes, flat, and the same bytes as int64 words (None when fewer than 8)."""
    b = x.contiguous().reshape(-1)
    if b.dtype != torch.uint8:
        b = b.view(torch.uint8)
    w = len(b) // 8
    if w == 0:
        return b, None
    try:
        words = b[: w * 8].view(torch.int64)
    except RuntimeError:  # storage offset not 8-byte aligned (a slice): a fresh copy is
        b = b.clone()
        words = b[: w * 8].view(torch.int64)
    return b, words


def _torch_weights(torch, device):
    def make(length: int, salt: int):
        i = torch.arange(length, dtype=torch.int64, device=device) + (salt + 1)
        return (i * (_GOLDEN - (1 << 64))) | 1  # wraps in 64 bits, as numpy's uint64 does

    make.device = str(device)
    return make


def _torch_row_mix(torch, main, col_weights, matmul: bool | None = None):
    """Each row's words times their column weights, summed (wrapping int64)."""
    if matmul is None:
        matmul = main.device.type == "cpu"
    if matmul:
        return torch.mv(main, col_weights)
    step = max(1, HASH_CHUNK_WORDS // main.shape[1])
    return torch.cat([(part * col_weights).sum(1) for part in main.split(step)])


def _torch_hash(torch, x, dtype: str, shape) -> str:
    x = x.resolve_conj().resolve_neg()  # a lazy conjugate's bytes are the values it shows
    if x.device.type != "cpu":
        return _device_hash(torch, x, dtype, shape)
    b = x.contiguous().reshape(-1)
    return _host_hash(dtype, shape, (b if b.dtype == torch.uint8 else b.view(torch.uint8)).numpy())


def _device_hash(torch, x, dtype: str, shape) -> str:
    """The weighted sums on the tensor's own device (any device: tests run it on the CPU)."""
    b, words = _torch_words(torch, x)
    parts: list[int] = []
    if words is not None:
        make = _torch_weights(torch, words.device)
        cols = min(HASH_COLUMNS, len(words))
        rows = len(words) // cols
        main = words[: rows * cols].view(rows, cols)
        rest = words[rows * cols :]
        r = (_torch_row_mix(torch, main, _mix_weights(cols, 2, make)) * _mix_weights(rows, 1, make)).sum()
        t = (
            (rest * _mix_weights(len(rest), 3, make)).sum()
            if len(rest)
            else torch.zeros((), dtype=torch.int64, device=words.device)
        )
        parts = torch.stack([r, t]).tolist()
        tail = b[len(words) * 8 :]
    else:
        tail = b
    return _hash_text(dtype, shape, parts, bytes(tail.cpu().tolist()) if len(tail) else b"")


# --- numpy -------------------------------------------------------------------------------------


def numpy_summary(a, with_hash: bool, extremes: bool = True) -> dict:
    import numpy as np  # already imported by the program: _numpy_array said so

    a = np.asarray(a)
    shape = [int(d) for d in a.shape]
    out: dict = {"shape": shape, "dtype": str(a.dtype), "device": "cpu", "numel": int(a.size)}
    if a.dtype.kind not in "biufc":
        raise TypeError(f"no statistics for dtype {a.dtype}")
    with np.errstate(all="ignore"):
        flat = a.reshape(-1)
        n = flat.size
        fusable = with_hash and _fusable(np, flat) and _xxhash() is not None
        fused = _numpy_fused(np, flat, extremes, shape) if fusable else None
        if fused is not None:
            stats, out["hash"] = fused
            out.update(stats)
            return out
        if n == 0:
            out.update(mean=None, std=None, min=None, max=None, norm=0.0, nan=0, inf=0)
        elif a.dtype.kind == "c":
            norm = float(np.linalg.norm(flat))
            nan, inf = int(np.isnan(flat).sum()), int(np.isinf(flat).sum())
            out.update(mean=None, std=None, min=None, max=None, norm=_finite(norm), nan=nan, inf=inf)
        else:
            out.update(_numpy_stats(np, flat, n, extremes))
        if with_hash:
            try:
                out["hash"] = _numpy_hash(np, a, out["dtype"], out["shape"])
            except ModuleNotFoundError as exc:
                out.update(hash=None, hash_error=str(exc))
    return out


def _numpy_reduce(np, flat, extremes: bool = True) -> list:
    # einsum's sum of a contiguous float array: 1.0 ms for 10M float32 against 1.6 for sum(),
    # within about 1e-6 relative of the exact sum even for a mean-dominated array.
    total = np.einsum("i->", flat) if flat.flags.c_contiguous else flat.sum()
    s, norm = float(total), float(np.sqrt(np.dot(flat, flat)))
    return [s, norm, float(flat.min()), float(flat.max())] if extremes else [s, norm, None, None]


def _numpy_stats(np, flat, n: int, extremes: bool = True) -> dict:
    if flat.dtype.kind != "f" or flat.dtype.itemsize < 4:
        flat = flat.astype(np.float64 if flat.dtype.kind != "f" else np.float32)
    s, norm, mn, mx = _numpy_reduce(np, flat, extremes)
    nan = inf = 0
    if not _all_finite(s, norm, mn, mx):
        nan, inf = int(np.isnan(flat).sum()), int(np.isinf(flat).sum())
        if nan or inf:
            flat = flat[np.isfinite(flat)]
            n = flat.size
        if n == 0:
            return {"mean": None, "std": None, "min": None, "max": None, "norm": None, "nan": nan, "inf": inf}
        flat = flat.astype(np.float64)
        s, norm, mn, mx = _numpy_reduce(np, flat, extremes)
    sumsq = norm * norm
    std = float(flat.std(ddof=1)) if _cancels(n, s, sumsq) else None
    return dict(_stats(n, s, sumsq, mn, mx, std), nan=nan, inf=inf)


def _numpy_hash(np, a, dtype: str, shape) -> str:
    return _host_hash(dtype, shape, np.ascontiguousarray(a).reshape(-1).view(np.uint8))


def _fusable(np, flat) -> bool:
    return (
        flat.dtype in (np.float32, np.float64) and flat.flags.c_contiguous and flat.nbytes >= FUSED_MIN_BYTES
    )


def _numpy_fused(np, flat, extremes: bool, shape: list):
    """(statistics, hash) of a large contiguous float array, slice by slice, each slice hashed
    and then reduced while it is still in the cache; the same numbers as the separate passes.
    None when a statistic is not finite (the separate passes count NaN and Inf)."""
    hasher = _xxhash().xxh3_128()
    step = max(1, FUSED_CHUNK_BYTES // flat.itemsize)
    s = sq = 0.0
    lows, highs = [], []
    for i in range(0, flat.size, step):
        part = flat[i : i + step]
        hasher.update(part.view(np.uint8))
        s += float(np.einsum("i->", part))
        sq += float(np.dot(part, part))
        if extremes:
            lows.append(part.min())
            highs.append(part.max())
    mn, mx = (float(min(lows)), float(max(highs))) if extremes else (None, None)
    if not _all_finite(s, sq, mn, mx):
        return None
    std = float(flat.std(ddof=1)) if _cancels(flat.size, s, sq) else None
    digest = _host_hash_text(str(flat.dtype), shape, hasher.intdigest())
    return dict(_stats(flat.size, s, sq, mn, mx, std), nan=0, inf=0), digest
