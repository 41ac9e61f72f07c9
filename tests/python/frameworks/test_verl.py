"""verl 0.9.1's single controller on CPU, as a user runs it (issue 38): a `RayWorkerGroup` of four
`Trainer` ranks (verl_job.py: a `Worker` with `@register` methods, gloo over the group's ranks) on
a `RayResourcePool(use_gpu=False)`. The ranks are listed with their worker group; `[rank N]`
stops rank N only inside a `ONE_TO_ALL` method doing an all-reduce and inside a
`DP_COMPUTE_PROTO` method on its chunk of a `DataProto`; a crash is a record and a case naming
the rank and the line, and a live attach to it stops on the user's raise line, not in Ray's
executor; the hang radar names the late rank, with the stack tree parting in user code, not in
verl's wrappers; a divergence watch names the rank and the step."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import ray
import torch
import verl_job
from helpers import dap_address, marker_line, stopped_frames, wait_until
from verl import DataProto
from verl.single_controller.ray import RayClassWithInitArgs

from raysleuth.dap.client import open_session
from raysleuth.shared.peer import check_broker_peer

JOB = str(Path(verl_job.__file__).resolve())
RANKS = 4
GROUP = "trainer"


@pytest.fixture(scope="module")
def trainers(verl_groups, client):
    """The group, its workers' pids and ids in rank order, once the broker lists the four ranks."""
    wg = verl_groups(RayClassWithInitArgs(cls=verl_job.Trainer), RANKS, GROUP)
    pids = wg.pid()  # ONE_TO_ALL: one answer a rank, in rank order

    def listed():
        rows = {w["pid"]: w for w in client.workers() if w["pid"] in pids and w["state"] != "exited"}
        ok = len(rows) == RANKS and all(w["rank"] is not None and w["actor_name"] for w in rows.values())
        return ok and [rows[p] for p in pids]

    rows = wait_until(listed, 30, 0.2, "the four ranks listed")
    return wg, pids, [w["id"] for w in rows]


def rows_of(client, pids) -> dict[int, dict]:
    return {w["rank"]: w for w in client.workers() if w["pid"] in pids and w["state"] != "exited"}


def paused_at(client, pids, line: int) -> dict[int, dict]:
    return {
        r: w
        for r, w in rows_of(client, pids).items()
        if w["state"] == "paused" and w["paused_at"] and w["paused_at"]["line"] == line
    }


def task_of(client, wid: str) -> str:
    """The TASK a worker's row shows, once the broker read it from Ray's task table (polled)."""
    return wait_until(
        lambda: next((w["task"] for w in client.workers() if w["id"] == wid), None), 30, 0.2, "the TASK shown"
    )


def armed(client, line: int) -> int:
    return sum(b["armed"] for b in client.breakpoints() if b["line"] == line)


def test_the_four_ranks_are_listed_with_their_worker_group(client, trainers):
    wg, pids, ids = trainers
    rows = rows_of(client, pids)
    assert sorted(rows) == [0, 1, 2, 3] and [rows[r]["pid"] for r in range(RANKS)] == pids
    for r, w in rows.items():
        assert (w["world_size"], w["actor_class"], w["worker_group"]) == (RANKS, "Trainer", GROUP), w
        assert w["actor_name"] == f"{GROUP}Trainer_0:{r}" and w["agent"], w
    group = next(g for g in client.get("/v1/groups") if g["name"] == GROUP)
    assert group["ranks"] == [0, 1, 2, 3] and sorted(group["workers"]) == sorted(ids)


async def test_rank_1_in_a_one_to_all_all_reduce_stops_only_rank_1_and_attach_by_rank(
    broker, client, trainers, clean_points, driver
):
    wg, pids, _ = trainers
    line = marker_line(JOB, "verl-all-reduce")
    client.set_breakpoints(JOB, [{"line": line, "condition": "[rank 1] step == 3"}])
    await asyncio.to_thread(wait_until, lambda: armed(client, line) >= 1, 15, 0.1, "armed in rank 1")
    done = driver.submit(wg.all_reduce, 3)
    stopped = await asyncio.to_thread(
        wait_until, lambda: paused_at(client, pids, line), 60, 0.1, "rank 1 paused after the all-reduce"
    )
    assert list(stopped) == [1] and stopped[1]["paused_at"]["path"] == JOB
    assert await asyncio.to_thread(task_of, client, stopped[1]["id"]) == "Trainer.all_reduce"
    others = rows_of(client, pids)
    assert all(others[r]["state"] != "paused" for r in (0, 2, 3)), others
    rows = client.post("/v1/evaluate", {"expression": "(self.rank, step, total)"})
    # all ranks' rank + step summed: (0+1+2+3) + 4*3
    assert [(r["rank"], r["value"]) for r in rows] == [(1, "(1, 3, 18.0)")]
    host, port = dap_address(broker)
    s = await open_session(host, port, {"token": broker.token, "rank": 1})
    try:
        tid, frames = await stopped_frames(s)
        top = frames[0]  # the user's method, not verl's `inner` wrapper that called it
        assert (top["source"]["path"], top["line"], top["name"]) == (JOB, line, "all_reduce"), frames[:3]
        got = await s.request("evaluate", {"expression": "step + self.rank", "frameId": top["id"]})
        assert got["body"]["result"] == "4"
        await s.request("continue", {"threadId": tid})
    finally:
        await s.request("disconnect", {}, check=False)
        await s.close()
    assert await asyncio.wait_for(asyncio.wrap_future(done), 60) == [18.0] * RANKS


def test_rank_2_in_a_dp_compute_proto_method_stops_on_its_chunk(client, trainers, clean_points, driver):
    wg, pids, _ = trainers
    line = marker_line(JOB, "verl-dp")
    client.set_breakpoints(JOB, [{"line": line, "condition": "[rank 2]"}])
    wait_until(lambda: armed(client, line) >= 1, 15, message="armed in rank 2")
    batch = DataProto.from_dict(tensors={"x": torch.arange(8.0)})
    done = driver.submit(wg.score, batch)
    stopped = wait_until(lambda: paused_at(client, pids, line), 60, message="rank 2 paused in score")
    assert list(stopped) == [2] and task_of(client, stopped[2]["id"]) == "Trainer.score", stopped
    rows = client.post("/v1/evaluate", {"expression": "data.batch['x'].tolist()"})
    assert [(r["rank"], r["value"]) for r in rows] == [(2, "[4.0, 5.0]")]  # rank 2's chunk of 8 rows
    client.post("/v1/continue", {})
    out = done.result(timeout=60)
    assert out.batch["y"].tolist() == [0.0, 2.0, 5.0, 7.0, 10.0, 12.0, 15.0, 17.0]


@contextlib.contextmanager
def stream_watched(broker, client):
    """A client on the broker's event stream: crashes are held for attach only while one is."""
    u = urlsplit(broker.http)
    sock = socket.create_connection((u.hostname, u.port), timeout=120)
    check_broker_peer(sock, broker.http)  # the token goes to a broker of ours only (#37)
    auth = f"Authorization: Bearer {broker.token}"
    sock.sendall(f"GET /v1/stream HTTP/1.1\r\nHost: {u.netloc}\r\n{auth}\r\n\r\n".encode())

    def drain():
        with contextlib.suppress(OSError):
            while sock.recv(65536):
                pass

    threading.Thread(target=drain, daemon=True).start()
    try:
        wait_until(lambda: client.get("/v1/status")["watchers"] >= 1, 10, message="the stream watched")
        yield
    finally:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()
        wait_until(lambda: client.get("/v1/status")["watchers"] == 0, 10, message="the stream left")


async def test_a_crash_on_rank_2_is_a_record_and_a_case_and_attach_stops_on_the_raise(
    broker, client, trainers, driver
):
    wg, pids, ids = trainers
    line = marker_line(JOB, "verl-raise")
    with stream_watched(broker, client):
        done = driver.submit(wg.check_loss, 3, 2)
        held = await asyncio.to_thread(
            wait_until,
            lambda: next(
                (w for w in client.workers() if w["id"] == ids[2] and w["state"] == "crashed"), None
            ),
            60,
            0.1,
            "rank 2 held as crashed",
        )
        assert held["paused_at"]["line"] == line and held["crash"], held
        host, port = dap_address(broker)
        s = await open_session(host, port, {"token": broker.token, "crash": held["crash"]})
        try:
            tid, frames = await stopped_frames(s)
            top = frames[0]  # the user's raise, not Ray's executor or verl's wrapper around it
            assert (top["source"]["path"], top["line"], top["name"]) == (JOB, line, "check_loss"), frames[:3]
            assert not any(str(f.get("source", {}).get("path")).endswith(".pyx") for f in frames), frames
            await s.request("continue", {"threadId": tid})
        finally:
            await s.request("disconnect", {}, check=False)
            await s.close()
    with pytest.raises(ray.exceptions.RayTaskError) as err:
        done.result(timeout=60)
    assert isinstance(err.value.cause, FloatingPointError)
    rec = next(c for c in client.get("/v1/crashes") if (c.get("worker") or {}).get("id") == ids[2])
    assert rec["kind"] == "exception" and rec["exc_type"] == "FloatingPointError"
    assert (rec["worker"]["rank"], rec["worker"]["worker_group"]) == (2, GROUP), rec["worker"]
    full = client.get(f"/v1/crashes/{rec['id']}")
    assert (full["frames"][0]["path"], full["frames"][0]["line"]) == (JOB, line)
    case = client.get(f"/v1/cases/crash-{rec['id']}")
    assert case["kind"] == "crash" and case["ranks"] == [2] and case["evidence"]["step"] == 3
    assert case["summary"].startswith(f"rank 2 raised FloatingPointError at verl_job.py:{line}"), case
    # The group lives on: verl's next call on all ranks answers.
    assert driver.submit(wg.check_loss, 1, 2).result(timeout=60) == [0.5] * RANKS


def stacks(client, **params) -> dict:
    return client.get("/v1/stacks?" + "&".join(f"{k}={v}" for k, v in params.items()))


def branches(node: dict) -> list[dict]:
    """The nodes of a stack tree where the ranks part."""
    out = [node] if node["branch"] else []
    for child in node["children"]:
        out += branches(child)
    return out


def test_the_hang_radar_names_the_late_rank_and_the_tree_parts_in_user_code(
    client, trainers, tmp_path, driver
):
    wg, pids, ids = trainers
    release = tmp_path / "release"
    job = next(w["job_id"] for w in client.workers() if w["id"] == ids[0])
    done = driver.submit(wg.late_all_reduce, 1, str(release))
    try:
        res = wait_until(
            lambda: (r := stacks(client, workers=",".join(ids), timeout=5, tree=1))["behind"] and r,
            60,
            0.2,
            "rank 1 behind the others' all-reduce",
        )
        assert [b["rank"] for b in res["behind"]] == [1], res["behind"]
        # verl's dispatch wrappers are library frames: the ranks part where rank 1 loops and the
        # others wait in the all-reduce, two lines of the user's method, never on verl's `inner`.
        trees = res["tree"] if isinstance(res["tree"], list) else [res["tree"]]
        [tree] = [t for t in trees if t.get("job_id") == job]
        [fork] = branches(tree)
        assert not fork["library"] and "verl" not in str(fork["path"]), fork
        kids = {tuple(c["ranks"]): c for c in fork["children"]}
        assert sorted(kids) == [(0, 2, 3), (1,)], kids
        for ranks, marker in (((1,), "verl-late-loop"), ((0, 2, 3), "verl-wait")):
            node = kids[ranks]
            where = (node["path"], node["function"], node["line"], node["library"])
            assert where == (JOB, "late_all_reduce", marker_line(JOB, marker), False), node
        # The text folds each run of library frames into one line, unless asked for all frames.
        assert "library frames" in res["text"] and "decorator.py" not in res["text"], res["text"]
        every = stacks(client, workers=",".join(ids), timeout=5, all_frames=1)["text"]
        assert "decorator.py" in every and "verl_job.py" in every, every
        client.put("/v1/stacks/watch", {"interval": 0.5, "samples": 2})

        def hang_case():
            return next(
                (c for c in client.get("/v1/cases") if c["kind"] == "hang" and c["job_id"] == job), None
            )

        case = wait_until(hang_case, 60, message="a hang case for the verl job")
        assert case["ranks"] == [1] and case["summary"].startswith("rank 1 "), case
        assert "verl_job.py" in case["summary"], case
    finally:
        client.delete("/v1/stacks/watch")
        release.write_text("go")
    assert done.result(timeout=60) == [16.0] * RANKS


def test_a_divergence_watch_names_rank_2_and_the_step(client, trainers):
    wg, pids, ids = trainers
    line = marker_line(JOB, "verl-watch")
    wid = client.post(
        "/v1/watches", {"path": JOB, "line": line, "expressions": ["grad_norm"], "step": "step"}
    )["id"]
    try:
        wait_until(
            lambda: all(wid in w["armed"] for w in client.workers() if w["id"] in ids),
            15,
            message="the watch armed on the four ranks",
        )
        for step in range(8):  # rank 2 drifts from step 5
            wg.train_step(step, 2, 5)
        got = wait_until(
            lambda: (w := client.get(f"/v1/watches/{wid}"))["divergence"] and w, 15, message="a divergence"
        )
        div = got["divergence"]
        assert (div["ranks"], div["step"], div["expression"]) == ([2], 5, "grad_norm"), got
        case = client.get(f"/v1/cases/{div['case']}")
        assert case["kind"] == "divergence" and case["ranks"] == [2]
        assert case["summary"].startswith("rank 2 diverged from 0-1,3 at pass 6 (step 5)"), case
        assert case["evidence"]["last_agreed_step"] == 4, case
    finally:
        client.delete(f"/v1/watches/{wid}")
