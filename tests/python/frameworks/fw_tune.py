"""A Ray Tune function trainable for the framework tests: a few steps, each reported to Tune."""

from ray import tune


def trainable(config):
    total = 0
    for step in range(3):
        total += config["x"] * (step + 1)  # @bp tune-step
        tune.report({"total": total, "step": step})
