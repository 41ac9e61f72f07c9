"""What `raysleuth.inspect` costs the task's thread: the summary of a 10M-element float32 CPU tensor
(shape, dtype, mean, std, min, max, L2 norm, NaN/Inf counts, content hash: raysleuth/model/
tensors.py) against `torch.linalg.vector_norm` of the same tensor in the same run, and the
summary of a 100-parameter state_dict (ms).

Rounds alternate baseline and summary, so a neighbour's load hits both alike. Three ratios:
`summary_ratio`, the median of the per-round ratios with torch's default threads;
`summary_ratio_best`, best time against best time; `summary_ratio_1thread`, the per-round median
with one torch thread. The target (<= 8: the summary does about eight reductions' worth of
work) is on the last: on a shared 2-core machine each of the summary's parallel reductions may
wait for a thread the neighbours' load descheduled (vector_norm runs on one thread), so the
other two measure the neighbours as much as the summary. `stats_only_*` leaves the hash out.
Without torch (the 3.12 virtualenv) the same is measured with numpy against `np.linalg.norm`.
"""

from __future__ import annotations

import importlib.util
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import report  # noqa: E402

from raysleuth.model.tensors import summarize, summary  # noqa: E402

N = 10_000_000
ROUNDS = 25


def _time(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _paired(baseline, candidates: dict) -> dict:
    """Alternate the baseline with each candidate for ROUNDS rounds: medians and paired ratios."""
    for fn in (baseline, *candidates.values()):
        fn()  # warm up: first-call allocations, weight caches
    base: list[float] = []
    runs: dict[str, list[float]] = {k: [] for k in candidates}
    ratios: dict[str, list[float]] = {k: [] for k in candidates}
    for _ in range(ROUNDS):
        for name, fn in candidates.items():
            b = _time(baseline)
            c = _time(fn)
            base.append(b)
            runs[name].append(c)
            ratios[name].append(c / b)
    out = {"norm_ms": statistics.median(base) * 1e3, "norm_ms_min": min(base) * 1e3}
    for name in candidates:
        out[f"{name}_ms"] = statistics.median(runs[name]) * 1e3
        out[f"{name}_ms_min"] = min(runs[name]) * 1e3
        out[f"{name}_ratio"] = statistics.median(ratios[name])
    return out


def with_torch() -> dict:
    import torch

    torch.manual_seed(0)
    t = torch.randn(N)
    candidates = {"summary": lambda: summary(t), "stats_only": lambda: summary(t, with_hash=False)}
    result = _paired(lambda: torch.linalg.vector_norm(t).item(), candidates)
    result["summary_ratio_best"] = result["summary_ms_min"] / result["norm_ms_min"]
    threads = torch.get_num_threads()
    layers = [torch.nn.Linear(256, 256) for _ in range(50)]  # 50 weights + 50 biases
    state = torch.nn.Sequential(*layers).state_dict()
    rows = summarize("model", state)
    assert len(rows) == 100 and all(r.get("hash") for r in rows)
    times = [_time(lambda: summarize("model", state)) for _ in range(ROUNDS)]
    torch.set_num_threads(1)
    try:
        one = _paired(lambda: torch.linalg.vector_norm(t).item(), candidates)
        times_one = [_time(lambda: summarize("model", state)) for _ in range(ROUNDS)]
    finally:
        torch.set_num_threads(threads)
    result.update({f"{k}_1thread": v for k, v in one.items() if k.endswith(("_ratio", "_ms"))})
    result.update(
        state_dict_ms=statistics.median(times) * 1e3,
        state_dict_ms_1thread=statistics.median(times_one) * 1e3,
        state_dict_params=sum(v.numel() for v in state.values()),
        library=f"torch {torch.__version__}",
        threads=threads,
    )
    return result


def with_numpy() -> dict:
    import numpy as np

    a = np.random.default_rng(0).standard_normal(N).astype(np.float32)
    result = _paired(
        lambda: float(np.linalg.norm(a)),
        {"summary": lambda: summary(a), "stats_only": lambda: summary(a, with_hash=False)},
    )
    result["summary_ratio_best"] = result["summary_ms_min"] / result["norm_ms_min"]
    shapes = {"weight": (256, 256), "bias": (256,)}
    state = {f"layer{i}.{k}": np.ones(shape, np.float32) for i in range(50) for k, shape in shapes.items()}
    times = [_time(lambda: summarize("model", state)) for _ in range(ROUNDS)]
    result.update(state_dict_ms=statistics.median(times) * 1e3, library=f"numpy {np.__version__}")
    return result


def main() -> None:
    result = with_torch() if importlib.util.find_spec("torch") is not None else with_numpy()
    result["elements"] = N
    # The target is for torch; numpy (the fallback without torch) is measured, not held to it.
    targets = {"summary_ratio_1thread": 8.0} if "threads" in result else {}
    report("inspect_cost", result, targets)


if __name__ == "__main__":
    main()
