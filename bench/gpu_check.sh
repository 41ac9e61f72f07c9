#!/usr/bin/env bash
# One prepared check of the GPU paths on a machine with a real NVIDIA GPU (issue 26, item 5):
# NVML's reading through the agent's probe, a CUDA tensor's summary, a forced CUDA out-of-memory
# error with its crash record (through a real local Ray cluster and broker), and the attribution
# of GPU memory (torch allocated, reserved but free, not PyTorch's). Prints what it saw; exits 1
# when a step fails, 2 when there is no GPU here (nothing to check).
# Usage: bench/gpu_check.sh   (needs .venv with torch with CUDA: pip install torch)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${RAYSLEUTH_PYTHON:-$ROOT/.venv/bin/python}"
command -v nvidia-smi >/dev/null 2>&1 || { echo "gpu_check: no nvidia-smi: no GPU on this machine"; exit 2; }
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv
export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 RAY_AUTH_MODE=disabled RAYSLEUTH=1
"$PY" - <<'PY'
import json, os, sys, tempfile, time
from pathlib import Path

import torch

if not torch.cuda.is_available():
    print("gpu_check: torch sees no CUDA device"); sys.exit(2)
from raysleuth.probes import gpu as probe
from raysleuth.model.tensors import summary

x = torch.randn(10_000_000, device="cuda")
s = probe.sample()
print("1. NVML sample of this process:", json.dumps(s)[:600])
assert s and s["gpus"] and s["gpus"][0]["used_bytes"] > 0, s
print("   torch allocated/reserved:", s.get("torch_allocated"), s.get("torch_reserved"))
t0 = time.perf_counter()
summ = summary(x)
print(f"2. CUDA tensor summary in {1e3 * (time.perf_counter() - t0):.1f} ms:", json.dumps(summ)[:400])
assert summ["device"].startswith("cuda"), summ

import ray
from raysleuth.broker.process import start_broker
from raysleuth.client import BrokerClient

temp = tempfile.mkdtemp(prefix="rs-gpu-")
ray.init(address="local", num_gpus=1, include_dashboard=True, _temp_dir=temp, log_to_driver=False)
broker = start_broker(Path(temp) / "state", address=ray.get_runtime_context().gcs_address)
try:
    client = BrokerClient(broker.http, broker.token)

    @ray.remote(num_gpus=1)
    class Hog:
        def grow(self, gib):
            import torch
            self.keep = getattr(self, "keep", []) + [torch.empty(int(gib * (1 << 30)), dtype=torch.uint8, device="cuda")]
            return torch.cuda.memory_allocated()

        def oom(self):
            import torch
            return torch.empty(1 << 45, dtype=torch.uint8, device="cuda")

    h = Hog.remote()
    for i in range(6):
        ray.get(h.grow.remote(0.5))
        time.sleep(1.5)  # heartbeats carry the samples: let a few through per step
    rows = client.get("/v1/gpu")
    last = rows[0]["samples"][-1]
    print("3. attribution of the last sample:", {k: last.get(k) for k in ("used_bytes", "torch_allocated", "torch_reserved", "torch_cached_free", "not_torch_bytes")})
    mem = [c for c in client.get("/v1/cases") if c["kind"] == "memory"]
    print("   memory cases:", [c["summary"] for c in mem])
    try:
        ray.get(h.oom.remote())
    except Exception as exc:
        print("4. forced OOM raised:", type(exc).__name__)
    for _ in range(60):
        recs = [r for r in client.get("/v1/crashes") if "out of memory" in (r.get("message") or "").lower()]
        if recs:
            break
        time.sleep(0.5)
    assert recs, "no crash record of the CUDA OOM"
    rec = client.get(f"/v1/crashes/{recs[0]['id']}")
    print("   OOM record:", rec["kind"], rec.get("hint"), json.dumps(rec.get("cuda_memory"))[:600])
    print("gpu_check: ok")
finally:
    broker.stop()
    ray.shutdown()
PY
