"""What every benchmark shares: a local Ray cluster with a broker, and the one-JSON-line report."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
os.environ.setdefault("RAY_AUTH_MODE", "disabled")


@contextlib.contextmanager
def cluster_with_broker(num_cpus: int = 4):
    """A local Ray cluster and a broker on it; both stopped on exit."""
    import ray

    from raysleuth.broker.process import start_broker

    temp = tempfile.mkdtemp(prefix="rs-bench-", dir="/tmp")
    ray.init(
        address="local",
        num_cpus=num_cpus,
        include_dashboard=True,
        _temp_dir=temp,
        log_to_driver=False,
        logging_level="ERROR",
    )
    # A folder of its own: Ray opens its temp dir to everyone (0777), and a state dir below a
    # folder others can write is refused (#37).
    state = tempfile.mkdtemp(prefix="rs-bench-state-", dir="/tmp")
    broker = start_broker(Path(state), address=ray.get_runtime_context().gcs_address)
    try:
        yield broker
    finally:
        broker.stop()
        ray.shutdown()
        shutil.rmtree(state, ignore_errors=True)


def report(name: str, result: dict, targets: dict[str, float]) -> None:
    """Print one JSON line: the numbers, the targets (upper bounds) and whether all are met."""
    out = {"bench": name, "python": sys.version.split()[0], **result, "targets": targets}
    out["ok"] = all(result[k] <= v for k, v in targets.items())
    print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in out.items()}), flush=True)
