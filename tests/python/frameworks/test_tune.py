"""Ray Tune: a logpoint in a function trainable prints from both trials of a real `tune.Tuner`,
each line tagged with its trial (the message evaluates Tune's own context in the frame)."""

from __future__ import annotations

from pathlib import Path

import fw_tune
from helpers import marker_line, wait_until
from ray import tune

JOB = str(Path(fw_tune.__file__).resolve())
LINE = marker_line(JOB, "tune-step")


def test_logpoint_prints_from_both_trials_tagged_with_the_trial(client, ray_cluster, clean_points, tmp_path):
    seen = client.get("/v1/logs")
    since = seen[-1]["seq"] if seen else 0
    client.set_breakpoints(
        JOB,
        [
            {
                "line": LINE,
                "condition": "step == 1",
                "logMessage": "trial {tune.get_context().get_trial_id()} x={config['x']} step={step}",
            }
        ],
    )
    tuner = tune.Tuner(
        fw_tune.trainable,
        param_space={"x": tune.grid_search([1, 2])},
        tune_config=tune.TuneConfig(max_concurrent_trials=2),
        run_config=tune.RunConfig(name="fw-tune", storage_path=str(tmp_path), verbose=0),
    )
    results = tuner.fit()
    assert not results.errors
    trials = {r.metrics["trial_id"]: r.config["x"] for r in results}
    assert sorted(trials.values()) == [1, 2] and all(r.metrics["total"] == r.config["x"] * 6 for r in results)

    def lines():
        got = [r for r in client.get(f"/v1/logs?since={since}") if r["path"] == JOB]
        return got if len(got) >= 2 else None

    got = wait_until(lines, 15, message="a logpoint line from each trial")
    want = sorted(f"trial {t} x={x} step=1" for t, x in trials.items())
    assert sorted(r["message"] for r in got) == want, got
    assert len({r["worker"] for r in got}) == 2, "each trial ran in its own worker"
