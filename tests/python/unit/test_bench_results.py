"""bench/results.py: the JSON lines of a `bench/run.sh all` run become bench/RESULTS.md."""

from __future__ import annotations

import importlib.util
import json

from helpers import REPO


def results_module():
    spec = importlib.util.spec_from_file_location("bench_results", REPO / "bench" / "results.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_figure_with_its_target_and_whether_it_holds(tmp_path):
    lines = [
        {"bench": "step_latency", "python": "3.11.7", "stackTrace_ms_broker": 1.0028, "next_ratio": 2.3,
         "targets": {"stackTrace_ms_broker": 3.0}, "ok": True},
        {"bench": "agent_footprint", "python": "3.12.1", "rss_added_mb": 7.5, "threads_added": 1,
         "targets": {"rss_added_mb": 5.0, "threads_added": 1}, "ok": False},
        {"bench": "broken", "python": "3.11.7", "error": "exit 1", "ok": False},
    ]  # fmt: skip
    src, dst = tmp_path / "all.jsonl", tmp_path / "RESULTS.md"
    src.write_text("=== noise\n" + "\n".join(json.dumps(x) for x in lines) + "\nnot json {\n")
    assert results_module().main(["results.py", str(src), str(dst)]) == 0
    md = dst.read_text()
    assert "## step_latency (Python 3.11.7): all targets hold" in md
    assert "| stackTrace_ms_broker | 1.003 | ≤ 3 | yes |" in md and "| next_ratio | 2.3 |  |  |" in md
    assert "## agent_footprint (Python 3.12.1): a target does not hold" in md
    assert "| rss_added_mb | 7.5 | ≤ 5 | **no** |" in md and "| threads_added | 1 | ≤ 1 | yes |" in md
    assert "## broken (Python 3.11.7): a target does not hold" in md and "| error | exit 1 |" in md
