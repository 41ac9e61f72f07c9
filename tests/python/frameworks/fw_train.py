"""A Ray Train loop for the framework tests: a tiny DDP model on CPU (gloo), one long function
with the loop inside, as real training code is shaped."""

import os

import ray.train
import ray.train.torch
import torch


def train_loop_per_worker(config):
    rank = ray.train.get_context().get_world_rank()
    model = ray.train.torch.prepare_model(torch.nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x, y = torch.ones(8, 4), torch.zeros(8, 1)
    for step in range(config["steps"]):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()  # gloo all-reduce: the ranks wait for each other here
        opt.step()
        metrics = {"loss": loss.item(), "step": step, "rank": rank}  # @bp train-step
        ray.train.report(metrics)
    # The fit's result carries no metrics without a checkpoint: each rank leaves its last step.
    with open(os.path.join(config["out"], f"rank-{rank}"), "w") as f:
        f.write(str(step))
