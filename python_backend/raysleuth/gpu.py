"""GPU memory of this process (a worker; a node relay for the doctor), through NVML and torch.

NVML comes from `pynvml` (nvidia-ml-py).

The NVML module is a seam: `RAYSLEUTH_NVML=some.module` names a stand-in with pynvml's calls
(tests use one on machines without a GPU). Without NVML or a GPU, `sample()` is None, and the
first failure is remembered so that later calls cost nothing.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import threading
import time

from raysleuth.swallow import swallow_exception

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
