"""Benchmark: merging 1,000 simulated workers' stacks into the parallel stack tree (issue 27),
against grouping the same rows by identical stacks (the hang radar's `group_stacks`) in the same
run. Prints one JSON line: tree_ms (median of 25, target <= 50 ms), group_ms, tree_vs_group."""

from __future__ import annotations

import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import report  # noqa: E402

from raysleuth.model.stacks import group_stacks  # noqa: E402
from raysleuth.model.stacktree import job_tree  # noqa: E402

WORKERS, ROUNDS, DEPTH = 1000, 25, 30


def rows() -> list[dict]:
    rng = random.Random(0)
    out = []
    for r in range(WORKERS):
        common = [{"path": f"/app/mod{d}.py", "line": 10 + d, "function": f"f{d}"} for d in range(DEPTH)]
        tail = [{"path": "/app/leaf.py", "line": rng.choice((5, 6, 7)), "function": "leaf"}]
        frames = list(reversed(common)) if r % 50 else tail + list(reversed(common))
        threads = [{"name": "MainThread", "id": 1, "main": True, "frames": frames}]
        out.append({"worker": f"w{r}", "rank": r, "job_id": "01", "threads": threads})
    return out


def median_ms(fn) -> float:
    times = []
    for _ in range(ROUNDS):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main() -> None:
    data = rows()
    tree = median_ms(lambda: job_tree(data, "01"))
    group = median_ms(lambda: group_stacks(data))
    report(
        "stack_tree", {"tree_ms": tree, "group_ms": group, "tree_vs_group": tree / group}, {"tree_ms": 50.0}
    )


if __name__ == "__main__":
    main()
