"""GPU memory of this process (a worker; a node relay for the doctor), through NVML and torch.

NVML comes from `pynvml` (nvidia-ml-py).

The NVML module is a seam: `RAYSLEUTH_NVML=some.module` names a stand-in with pynvml's calls
(tests use one on machines without a GPU). Without NVML or a GPU, `sample()` is None, and the
first failure is remembered so that later calls cost nothing.

At a CUDA out-of-memory error, `cuda_oom_evidence` keeps what torch's caching allocator knows
(issue 14). torch.cuda is the second seam: `RAYSLEUTH_TORCH_CUDA=some.module` names a stand-in
with its memory calls. torch itself is never imported here: only a program that loaded it can
have run out of CUDA memory.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import threading
import time

from raysleuth.shared.swallow import swallow_exception

log = logging.getLogger(__name__)

_lock = threading.Lock()
_nvml = None
_failed: str | None = None
"""Why NVML is unusable in this process (then `sample()` is None without trying again)."""


def _init():
    global _nvml, _failed
    with _lock:
        if _nvml is not None or _failed is not None:
            return _nvml
        name = os.environ.get("RAYSLEUTH_NVML") or "pynvml"
        try:
            mod = importlib.import_module(name)
            mod.nvmlInit()
            _nvml = mod
        except Exception as exc:  # noqa: BLE001 - no library, no driver, no GPU: no samples
            _failed = f"{type(exc).__name__}: {exc}"
        return _nvml


def unavailable() -> str | None:
    """Why there are no GPU samples here, or None when NVML works."""
    _init()
    return _failed


def _visible_indices(count: int) -> list[int]:
    """NVML indices of the GPUs this process may use (Ray sets CUDA_VISIBLE_DEVICES per worker)."""
    vis = os.environ.get("CUDA_VISIBLE_DEVICES")
    if vis is None:
        return list(range(count))
    out = []
    for part in vis.split(","):
        part = part.strip()
        if part.isdigit() and int(part) < count:
            out.append(int(part))
    return out


def _torch_memory(swallow) -> dict:
    torch = sys.modules.get("torch")  # never import torch here: only report what the task uses
    if torch is None:
        return {}
    try:
        if not torch.cuda.is_initialized():
            return {}
        return {
            "torch_allocated": int(torch.cuda.memory_allocated()),
            "torch_max_allocated": int(torch.cuda.max_memory_allocated()),
            "torch_reserved": int(torch.cuda.memory_reserved()),
        }
    except Exception:  # noqa: BLE001 - torch's counters failed: the NVML sample goes without them
        if swallow is not None:
            swallow("reading torch's CUDA memory counters")
        else:
            swallow_exception(log, "reading torch's CUDA memory counters")
        return {}


def sample(swallow=None) -> dict | None:
    """{t, gpus: [{gpu, uuid, used_bytes, device_used_bytes, total_bytes}], torch_*} or None.

    `used_bytes` is what this process holds on that GPU (NVML's per-process accounting);
    `device_used_bytes` is the whole device's use, all processes together. `swallow(what)`
    logs a failure that is ignored (the agent passes its own, which writes to its file).
    """
    nvml = _init()
    if nvml is None:
        return None
    try:
        pid = os.getpid()
        gpus = []
        for index in _visible_indices(int(nvml.nvmlDeviceGetCount())):
            h = nvml.nvmlDeviceGetHandleByIndex(index)
            mem = nvml.nvmlDeviceGetMemoryInfo(h)
            mine = 0
            for proc in nvml.nvmlDeviceGetComputeRunningProcesses(h) or []:
                if getattr(proc, "pid", None) == pid:
                    mine += int(getattr(proc, "usedGpuMemory", 0) or 0)
            uuid = nvml.nvmlDeviceGetUUID(h)
            gpus.append(
                {
                    "gpu": index,
                    "uuid": uuid.decode() if isinstance(uuid, bytes) else str(uuid),
                    "used_bytes": mine,
                    "device_used_bytes": int(mem.used),
                    "total_bytes": int(mem.total),
                }
            )
    except Exception as exc:  # noqa: BLE001 - a driver hiccup: no sample this time
        return {"t": time.time(), "gpus": [], "error": f"{type(exc).__name__}: {exc}"}
    return {"t": time.time(), "gpus": gpus, **_torch_memory(swallow)}


# --- CUDA memory at an out-of-memory error ----------------------------------------------------

MEMORY_SUMMARY_CHARS = 20_000
"""torch.cuda.memory_summary() text kept in a crash record."""

LARGEST = 10
"""Largest live allocator blocks and tensors kept."""

TENSOR_SCAN_S = 0.5
"""Longest the walk over live objects for CUDA tensors may take."""


def _cuda():
    seam = os.environ.get("RAYSLEUTH_TORCH_CUDA")
    if seam:
        return importlib.import_module(seam)
    torch = sys.modules.get("torch")
    return getattr(torch, "cuda", None) if torch is not None else None


def is_cuda_oom(exc) -> bool:
    """`exc` (or its cause or context) is torch's OutOfMemoryError or CUDA's "out of memory"."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    oom = getattr(torch, "OutOfMemoryError", None) or getattr(
        getattr(torch, "cuda", None), "OutOfMemoryError", None
    )
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen and len(seen) < 6:
        seen.add(id(exc))
        if isinstance(oom, type) and isinstance(exc, oom):
            return True
        try:
            text = str(exc)
        except Exception:  # noqa: BLE001 - a message that cannot be read is no evidence
            text = ""
        if "CUDA out of memory" in text or ("out of memory" in text and "CUDA" in text):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def cuda_oom_evidence(exc, swallow=None) -> dict | None:
    """For a CUDA out-of-memory error with torch loaded: {allocated_bytes, reserved_bytes,
    max_allocated_bytes, summary (torch.cuda.memory_summary()), largest (the allocator's biggest
    live blocks), tensors (the biggest CUDA tensors Python still holds)}; None for other errors."""
    if not is_cuda_oom(exc):
        return None
    out: dict = {"summary": None, "largest": [], "tensors": []}
    try:
        cuda = _cuda()
        if cuda is None or not cuda.is_initialized():
            return dict(out, error="CUDA was never initialized in this process")
        out["allocated_bytes"] = int(cuda.memory_allocated())
        out["reserved_bytes"] = int(cuda.memory_reserved())
        out["max_allocated_bytes"] = int(cuda.max_memory_allocated())
        out["summary"] = str(cuda.memory_summary())[:MEMORY_SUMMARY_CHARS]
        out["largest"] = _largest_blocks(cuda.memory_snapshot())
    except Exception as e:  # noqa: BLE001 - a partial record is still worth sending
        out["error"] = f"{type(e).__name__}: {e}"[:300]
        _swallowed(swallow, "reading torch's CUDA memory at an out-of-memory error")
    out["tensors"] = _largest_tensors(swallow)
    return out


def _swallowed(swallow, what: str) -> None:
    if swallow is not None:
        swallow(what)
    else:
        swallow_exception(log, what)


def _largest_blocks(segments) -> list[dict]:
    """The allocator's live blocks, biggest first: [{bytes, device, address, stream, frames}]."""
    blocks = []
    for seg in segments or ():
        for b in seg.get("blocks") or ():
            if b.get("state") == "active_allocated":
                frames = [
                    f"{f.get('filename')}:{f.get('line')} {f.get('name')}"
                    for f in (b.get("frames") or [])[:6]
                ]
                blocks.append(
                    {
                        "bytes": int(b.get("size") or 0),
                        "device": seg.get("device"),
                        "address": hex(int(b.get("address") or 0)),
                        "stream": seg.get("stream"),
                        "frames": frames,
                    }
                )
    blocks.sort(key=lambda b: -b["bytes"])
    return blocks[:LARGEST]


def _largest_tensors(swallow) -> list[dict]:
    """CUDA tensors reachable from Python now, biggest storage first (one per storage)."""
    return sorted(_cuda_storages(swallow).values(), key=lambda t: -t["bytes"])[:LARGEST]


def _cuda_storages(swallow) -> dict[int, dict]:
    """Storage address -> {bytes, shape, dtype, device, requires_grad} of the CUDA tensors
    reachable from Python now, found by a walk over the garbage collector's objects that stops
    after TENSOR_SCAN_S. The torch.cuda seam may list them itself (`live_tensors()`)."""
    import gc

    seam = _cuda() if os.environ.get("RAYSLEUTH_TORCH_CUDA") else None
    if seam is not None and hasattr(seam, "live_tensors"):
        return {int(t["ptr"]): {k: v for k, v in t.items() if k != "ptr"} for t in seam.live_tensors()}
    torch = sys.modules.get("torch")
    if torch is None:
        return {}
    found: dict[int, dict] = {}
    deadline = time.monotonic() + TENSOR_SCAN_S
    try:
        for i, obj in enumerate(gc.get_objects()):
            if i % 4096 == 0 and time.monotonic() > deadline:
                break
            # type(), not isinstance(): a deprecated proxy's __class__ would warn on stderr
            if not issubclass(type(obj), torch.Tensor) or obj.device.type != "cuda":
                continue
            storage = obj.untyped_storage()
            key = storage.data_ptr()
            if key not in found:
                found[key] = {
                    "bytes": int(storage.nbytes()),
                    "shape": list(obj.shape),
                    "dtype": str(obj.dtype).replace("torch.", ""),
                    "device": str(obj.device),
                    "requires_grad": bool(obj.requires_grad),
                }
    except Exception:  # noqa: BLE001 - the blocks and the summary stand without it
        _swallowed(swallow, "walking live objects for CUDA tensors")
    return found


# --- CUDA tensors new between two samples (issue 26) --------------------------------------------

WALK_GROWTH = 256 << 20
"""torch's allocated memory must have grown this much since the last look for a new look."""

NEW_TENSORS = 5
"""New tensors named per look, biggest first."""


def new_cuda_tensors(state: dict, torch_allocated, swallow=None) -> list[dict] | None:
    """The largest CUDA tensors that appeared since the last look, for a memory case to name.

    Looks (a bounded walk over live objects) only when torch's allocated memory grew by
    WALK_GROWTH since the last look, so a steady worker pays nothing; the first look is the
    baseline. `state` is the caller's, kept between calls. None when it did not look."""
    if not isinstance(torch_allocated, int):
        return None
    last = state.get("allocated")
    if last is not None and torch_allocated - last < WALK_GROWTH:
        if torch_allocated < last:
            state["allocated"] = torch_allocated  # freed: growth counts from here
        return None
    live = _cuda_storages(swallow)
    before = state.get("ptrs")
    state["allocated"], state["ptrs"] = torch_allocated, set(live)
    if before is None:
        return None
    new = [t for ptr, t in live.items() if ptr not in before]
    return sorted(new, key=lambda t: -t["bytes"])[:NEW_TENSORS]
