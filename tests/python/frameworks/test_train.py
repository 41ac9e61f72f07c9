"""Ray Train: a `[rank 1]` cluster breakpoint inside a real `TorchTrainer`'s training loop (two CPU
workers, gloo) stops rank 1 only; attach by rank through the broker, continue, and the fit ends."""

from __future__ import annotations

import asyncio
from pathlib import Path

import fw_train
from helpers import dap_address, marker_line, stopped_frames, wait_until
from ray.train import RunConfig, ScalingConfig
from ray.train.torch import TorchTrainer

from raysleuth.dap.client import open_session

JOB = str(Path(fw_train.__file__).resolve())
LINE = marker_line(JOB, "train-step")
STEPS = 4  # steps 0-3: both ranks write "3" when their loop ends


def paused_at_line(client) -> list[dict]:
    return [
        w
        for w in client.workers()
        if w["state"] == "paused"
        and w["paused_at"]
        and (w["paused_at"]["path"], w["paused_at"]["line"]) == (JOB, LINE)
    ]


async def test_rank_1_breakpoint_in_train_loop_stops_only_rank_1(
    broker, client, ray_cluster, clean_points, tmp_path
):
    client.set_breakpoints(JOB, [{"line": LINE, "condition": "[rank 1] step == 2"}])
    trainer = TorchTrainer(
        fw_train.train_loop_per_worker,
        train_loop_config={"steps": STEPS, "out": str(tmp_path)},
        scaling_config=ScalingConfig(num_workers=2, use_gpu=False),
        run_config=RunConfig(name="fw-train", storage_path=str(tmp_path)),
    )
    fit = asyncio.ensure_future(asyncio.to_thread(trainer.fit))
    stopped = await asyncio.to_thread(wait_until, lambda: paused_at_line(client), 120, 0.2, "rank 1 paused")
    assert [w["rank"] for w in stopped] == [1]
    assert not fit.done(), "the fit waits for the paused rank"
    # What will end the pause: Ray Train's health check (600 s) before gloo's default (1800 s).
    deadline = stopped[0]["deadline"]
    assert "health check" in deadline["what"] and deadline["seconds"] == 600.0, stopped[0]
    assert deadline["at"] == stopped[0]["paused_since"] + 600.0
    assert {d["seconds"] for d in stopped[0]["deadlines"]} == {600.0, 1800.0}
    host, port = dap_address(broker)
    s = await open_session(host, port, {"token": broker.token, "rank": 1})
    try:
        tid, frames = await stopped_frames(s)
        top = frames[0]
        assert (top["source"]["path"], top["line"], top["name"]) == (JOB, LINE, "train_loop_per_worker")
        got = await s.request("evaluate", {"expression": "(rank, step)", "frameId": top["id"]})
        assert got["body"]["result"] == "(1, 2)"
        assert [w["rank"] for w in paused_at_line(client)] == [1], "rank 0 never stops"
        await s.request("continue", {"threadId": tid})
        result = await asyncio.wait_for(fit, 180)
    finally:
        await s.request("disconnect", {}, check=False)
        await s.close()
    assert result.error is None
    assert {p.name: p.read_text() for p in tmp_path.glob("rank-*")} == {"rank-0": "3", "rank-1": "3"}
    assert not paused_at_line(client)
