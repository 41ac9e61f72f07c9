"""The hang radar on a real cluster (issue 12): GET /v1/stacks groups the ranks of a real gloo job
that one rank holds back and names that rank; workers waiting in C calls answer through their
agent, one without the agent through py-spy; the watch mode raises one "suspected hang" for a job
that stopped moving and none for a job that progresses; `raysleuth stacks` prints the same."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import hang_job
import pytest
import ray
from helpers import FIXTURES, free_port, marker_line, wait_until

FIXTURE = FIXTURES / "hang_job.py"


def at(frames: list[dict], marker: str) -> bool:
    line = marker_line(FIXTURE, marker)
    return any(Path(f["path"]).resolve() == FIXTURE.resolve() and f["line"] == line for f in frames)


def worker_id(client, pid: int, agent: bool = True) -> str:
    w = wait_until(
        lambda: next((w for w in client.workers() if w["pid"] == pid and w["agent"] == agent), None),
        60,
        message=f"worker pid {pid} in the table (agent={agent})",
    )
    return w["id"]


def stacks(client, **params) -> dict:
    query = "&".join(f"{k}={quote(str(v))}" for k, v in params.items())
    return client.get(f"/v1/stacks?{query}")


def wait_for_stacks(client, ok, within: float, message: str, **params) -> dict:
    """GET /v1/stacks until `ok(result)`; on timeout, fail with what the rows said last."""
    last: list[dict] = []

    def check():
        res = stacks(client, **params)
        last[:] = [res]
        return res if ok(res) else None

    try:
        return wait_until(check, within, interval=0.2, message=message)
    except AssertionError as exc:
        rows = [{k: w.get(k) for k in ("rank", "source", "error", "hint")} for w in last[0]["workers"]]
        raise AssertionError(f"{exc}\nlast rows: {rows}\nlast text:\n{last[0]['text']}") from None


def test_rank_3_looping_before_an_all_reduce_stands_apart_and_is_named_behind(client, tmp_path):
    pytest.importorskip("torch", reason="torch (CPU) is installed in the 3.11 .venv only: no gloo job here")
    release = tmp_path / "release"
    port = free_port()
    env = {"env_vars": {"TORCH_FR_BUFFER_SIZE": "2000"}}  # the flight recorder on
    cls = ray.remote(num_cpus=0)(hang_job.GlooRank).options(runtime_env=env)
    ranks = [cls.remote(r, 4, port) for r in range(4)]
    try:
        pids = ray.get([a.pid.remote() for a in ranks], timeout=120)
        ids = [worker_id(client, pid) for pid in pids]
        refs = [a.run.remote(3, str(release)) for a in ranks]

        def grouped(res):
            groups = {tuple(g["ranks"]): g for g in res["groups"]}
            # past the first all-reduce (all ranks pass it): ranks 0-2 in the second, rank 3 looping
            return (
                set(groups) == {(0, 1, 2), (3,)}
                and res["behind"]
                and res["collectives"]
                and at(groups[(0, 1, 2)]["frames"], "all-reduce")
                and at(groups[(3,)]["frames"], "late-loop")
            )

        res = wait_for_stacks(
            client, grouped, 60, "ranks 0-2 in the all-reduce, rank 3 apart", workers=",".join(ids), timeout=5
        )
        assert res["elapsed_ms"] < 5000
        groups = {tuple(g["ranks"]): g for g in res["groups"]}
        assert at(groups[(0, 1, 2)]["frames"], "all-reduce") and not groups[(0, 1, 2)]["minority"]
        assert at(groups[(3,)]["frames"], "late-loop") and groups[(3,)]["minority"]
        assert groups[(0, 1, 2)]["ranks_text"] == "0-2" and groups[(3,)]["workers"] == [ids[3]]
        assert all(w["source"] == "agent" and w["walk_ms"] < 100 for w in res["workers"])
        [behind] = res["behind"]
        assert behind["rank"] == 3 and behind["worker"] == ids[3]
        assert "last entered #" in behind["why"] and "all_reduce" in behind["why"], behind
        seqs = {c["rank"]: c["seq"] for c in res["collectives"]}
        assert sorted(seqs) == [0, 1, 2, 3] and seqs[3] < seqs[0] == seqs[1] == seqs[2]
        assert "ranks 0-2 (3)" in res["text"] and "rank 3 (1)" in res["text"]

        release.write_text("go")
        assert ray.get(refs, timeout=60) == [16.0] * 4
    finally:
        release.write_text("go")
        for a in ranks:
            ray.kill(a)


def test_the_watch_files_a_hang_case_naming_rank_1_that_never_entered_the_all_reduce(client, tmp_path):
    """Issue 26: a gloo job whose rank 1 never enters the collective the others wait in; with the
    watch on, a hang case names rank 1 (the flight recorder's sequence numbers say it is behind),
    filed at the sample that found the hang."""
    pytest.importorskip("torch", reason="torch (CPU) is installed in the 3.11 .venv only: no gloo job here")
    release = tmp_path / "release"
    port = free_port()
    cls = ray.remote(num_cpus=0)(hang_job.GlooRank).options(
        runtime_env={"env_vars": {"TORCH_FR_BUFFER_SIZE": "2000"}}
    )
    ranks = [cls.remote(r, 4, port) for r in range(4)]
    samples = 2
    try:
        pids = ray.get([a.pid.remote() for a in ranks], timeout=120)
        ids = [worker_id(client, pid) for pid in pids]
        job = next(w["job_id"] for w in client.workers() if w["id"] == ids[0])
        refs = [a.run.remote(1, str(release)) for a in ranks]
        wait_for_stacks(
            client,
            lambda res: [b["rank"] for b in res["behind"]] == [1],
            60,
            "rank 1 behind the others' all-reduce",
            workers=",".join(ids),
            timeout=5,
        )
        client.put("/v1/stacks/watch", {"interval": 0.5, "samples": samples})

        def hang_case():
            cases = client.get("/v1/cases")
            return next((c for c in cases if c["kind"] == "hang" and c["job_id"] == job), None)

        case = wait_until(hang_case, 60, message="a hang case for the gloo job")
        assert case["ranks"] == [1] and case["summary"].startswith("rank 1 last entered #"), case
        assert "all_reduce" in case["summary"] and "hang_job.py" in case["summary"], case
        detail = client.get(f"/v1/cases/{case['id']}")
        assert detail["evidence"]["samples"] == samples  # filed at the sample that raised it
        assert {tuple(g["ranks"]) for g in detail["evidence"]["stacks"]["groups"]} == {(0, 2, 3), (1,)}
        release.write_text("go")
        assert ray.get(refs, timeout=60) == [16.0] * 4
    finally:
        client.delete("/v1/stacks/watch")
        release.write_text("go")
        for a in ranks:
            ray.kill(a)


def test_workers_in_time_sleep_and_in_ray_get_answer_through_their_agent(broker, client):
    sleeper = ray.remote(num_cpus=0)(hang_job.sleeping_task).remote(120)
    getter = ray.remote(num_cpus=0)(hang_job.Getter).remote()
    try:
        getter_id = worker_id(client, ray.get(getter.pid.remote(), timeout=60))
        getter.wait_for.remote(120)
        sleeping = wait_until(
            lambda: [w["id"] for w in client.workers() if w["task"] == "sleeping_task" and w["agent"]],
            60,
            message="a worker running sleeping_task",
        )
        ids = ",".join([getter_id, *sleeping])

        def both(res):
            rows = {w["worker"]: w for w in res["workers"]}
            frames = lambda wid: rows[wid]["threads"][0]["frames"] if rows[wid]["threads"] else []  # noqa: E731
            return at(frames(getter_id), "getting") and any(at(frames(s), "sleeping") for s in sleeping)

        res = wait_for_stacks(client, both, 30, "stacks of the sleeper and the getter", workers=ids)
        assert all(w["source"] == "agent" and w["error"] is None for w in res["workers"])
        assert all(w["threads"][0]["main"] for w in res["workers"])

        env = dict(os.environ, RAYSLEUTH_TOKEN=broker.token)
        cli = [sys.executable, "-m", "raysleuth", "stacks", "--broker", broker.http, "--workers", getter_id]
        out = subprocess.run(cli, env=env, capture_output=True, text=True, check=True, timeout=60).stdout
        assert "ray.get(ray.remote(sleeping_task).remote(seconds))" in out and "1 worker(s) in" in out
        js = subprocess.run([*cli, "--json"], env=env, capture_output=True, text=True, check=True, timeout=60)
        assert [w["worker"] for w in json.loads(js.stdout)["workers"]] == [getter_id]
    finally:
        ray.cancel(sleeper, force=True)
        ray.kill(getter)


def test_a_worker_without_the_agent_is_dumped_by_py_spy_or_says_why_not(client):
    napper = ray.remote(num_cpus=0)(hang_job.Napper).options(runtime_env={"env_vars": {"RAYSLEUTH": "0"}})
    a = napper.remote()
    try:
        pid = ray.get(a.pid.remote(), timeout=60)
        wid = worker_id(client, pid, agent=False)
        a.nap.remote(120)
        probe = _probe_pyspy(pid)
        if probe is None:  # py-spy reads processes here: the radar must have the real stack
            ok = lambda r: at(_main(r), "napping")  # noqa: E731
            res = wait_for_stacks(client, ok, 30, "py-spy's stack of the napper", workers=wid, timeout=10)
            [row] = res["workers"]
            assert row["source"] == "py-spy" and row["error"] is None
        else:  # it cannot here: the row says why and shows no stack
            [row] = stacks(client, workers=wid, timeout=10)["workers"]
            assert row["threads"] == [] and row["source"] is None
            assert "no Ray Sleuth agent" in row["error"] and "py-spy" in row["error"], (row, probe)
    finally:
        ray.kill(a)


def test_a_worker_wedged_in_c_holding_the_gil_is_read_by_py_spy_after_its_agent_times_out(client):
    a = ray.remote(num_cpus=0)(hang_job.Wedged).remote()
    try:
        pid = ray.get(a.pid.remote(), timeout=60)
        wid = worker_id(client, pid)
        a.wedge.remote(40)
        if (probe := _probe_pyspy(pid)) is not None:
            pytest.skip(f"py-spy cannot read processes here: {probe}")
        ok = lambda r: at(_main(r), "wedged") and r["workers"][0]["source"] == "py-spy"  # noqa: E731
        res = wait_for_stacks(client, ok, 30, "py-spy's stack of the wedged worker", workers=wid, timeout=3)
        [row] = res["workers"]
        assert row["source"] == "py-spy" and row["error"] is None
        assert 1500 <= res["elapsed_ms"] < 3500  # half the deadline for the agent, then py-spy
    finally:
        ray.kill(a)


def _main(res: dict) -> list[dict]:
    """The main thread's frames of the only row (py-spy lists threads in its own order)."""
    rows = res["workers"]
    threads = rows[0]["threads"] if rows else []
    main = [t for t in threads if t["main"]]
    return main[0]["frames"] if main else []


def _probe_pyspy(pid: int) -> str | None:
    """None when py-spy can read `pid` from this test; else what it said."""
    exe = Path(sys.executable).with_name("py-spy")
    exe = str(exe) if exe.exists() else shutil.which("py-spy")
    if exe is None:
        return "py-spy is not installed"
    p = subprocess.run([exe, "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=30)
    return None if p.returncode == 0 else (p.stderr or p.stdout).strip()


def test_watch_raises_one_hang_for_a_stuck_job_and_none_for_one_that_progresses(client, ray_cluster):
    address = ray_cluster.address_info["gcs_address"]
    drivers = {
        mode: subprocess.Popen(
            [sys.executable, str(FIXTURES / "hang_driver.py"), mode, address],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for mode in ("stuck", "progress")
    }
    try:
        jobs = {mode: json.loads(p.stdout.readline())["job_id"] for mode, p in drivers.items()}
        since = max([e["seq"] for e in client.get("/v1/events")], default=0)
        status = client.put("/v1/stacks/watch", {"interval": 0.6, "samples": 5})
        assert status["on"] and status["interval"] == 0.6 and status["samples"] == 5

        def hangs():
            return [e["fields"] for e in client.get(f"/v1/events?since={since}&name=suspected%20hang")]

        wait_until(lambda: any(h["job_id"] == jobs["stuck"] for h in hangs()), 60, message="a hang")
        taken = client.get("/v1/stacks/watch")["taken"]
        wait_until(lambda: client.get("/v1/stacks/watch")["taken"] >= taken + 6, 30, message="6 more samples")
        mine = [h for h in hangs() if h["job_id"] in jobs.values()]
        assert [h["job_id"] for h in mine] == [jobs["stuck"]], mine
        assert mine[0]["samples"] == 5 and "hang_job.py" in mine[0]["text"]
        status = client.get("/v1/stacks/watch")
        assert status["cost_ms"] is not None and status["cost_ms"] < 5000 and status["error"] is None
        samples = client.events(("stacks",))  # what `raysleuth stacks --watch` reads
        try:
            event, data = next(samples)
        finally:
            samples.close()
        assert event == "stacks" and {w["job_id"] for w in data["workers"]} >= set(jobs.values())
    finally:
        assert client.delete("/v1/stacks/watch")["on"] is False
        for p in drivers.values():
            p.stdin.close()
        for p in drivers.values():
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def test_a_bad_query_is_refused_with_a_hint(client):
    for query in ("ranks=x", "timeout=0", "native=maybe"):
        with pytest.raises(Exception) as err:
            client.get(f"/v1/stacks?{query}")
        assert getattr(err.value, "status", None) == 400 and err.value.hint


def test_a_group_step_names_the_ranks_that_wait_in_gloo_for_a_rank_outside_the_group(client, tmp_path):
    """Issue 27: four gloo ranks stopped by a `[group job-<id>]` breakpoint before an all-reduce;
    a group of ranks 0-2 steps over it: the step returns within its bound naming 0-2 as running
    (they wait for rank 3, outside the group), the collectives queue marks rank 3 behind, and once
    rank 3 goes on they stop again at the next line."""
    pytest.importorskip("torch", reason="torch (CPU) is installed in the 3.11 .venv only: no gloo job here")
    release = tmp_path / "release"
    release.write_text("go")  # no rank loops before the second all-reduce
    line = marker_line(FIXTURE, "all-reduce")
    port = free_port()
    cls = ray.remote(num_cpus=0)(hang_job.GlooRank).options(
        runtime_env={"env_vars": {"TORCH_FR_BUFFER_SIZE": "2000"}}
    )
    ranks = [cls.remote(r, 4, port) for r in range(4)]
    refs = []
    try:
        pids = ray.get([a.pid.remote() for a in ranks], timeout=120)
        ids = [worker_id(client, pid) for pid in pids]
        job = next(w["job_id"] for w in client.workers() if w["id"] == ids[0])
        client.set_breakpoints(str(FIXTURE), [{"line": line, "condition": f"[group job-{job}]"}])
        # Armed in all four first: a rank that ran past the line unarmed would wait in the
        # all-reduce for the others, stopped at the line, and never stop itself.
        wait_until(
            lambda: all(
                i
                in {
                    w["worker"]
                    for b in client.get("/v1/breakpoints")
                    if b["line"] == line
                    for w in b["armed_on"]
                }
                for i in ids
            ),
            60,
            0.2,
            "the breakpoint armed in the four ranks",
        )
        refs = [a.run.remote(-1, str(release)) for a in ranks]

        def paused(which):
            ws = {w["id"]: w for w in client.workers()}
            return all(ws[i]["state"] == "paused" and (ws[i]["paused_at"] or {}).get("line") for i in which)

        wait_until(lambda: paused(ids), 60, 0.2, "the four ranks paused before the second all-reduce")
        client.set_breakpoints(str(FIXTURE), [])
        rows = client.post("/v1/evaluate", {"expression": "self.rank", "workers": ids})  # links to all four
        assert sorted(r["value"] for r in rows) == ["0", "1", "2", "3"]
        client.request("PUT", "/v1/groups/first3", {"ranks": [0, 1, 2], "job_id": job})

        t0 = time.monotonic()
        res = client.post("/v1/step", {"group": "first3", "kind": "next", "timeout": 3})
        took = time.monotonic() - t0
        assert [r["rank"] for r in res["running"]] == [0, 1, 2] and not res["stepped"], res
        assert took < 15, took
        assert "did not stop again within 3 s" in res["running"][0]["reason"]

        queue = wait_until(
            lambda: (q := client.get(f"/v1/collectives?job={job}")) and any(r.get("behind") for r in q) and q,
            30,
            0.5,
            "rank 3 behind in the collectives queue",
        )
        assert [r["rank"] for r in queue if r.get("behind")] == [3], queue

        client.post("/v1/continue", {"workers": [ids[3]]})  # rank 3 enters: the all-reduce completes
        wait_until(lambda: paused(ids[:3]), 60, 0.2, "ranks 0-2 stopped again after their step")
        client.post("/v1/continue", {"workers": ids[:3]})
        assert ray.get(refs, timeout=60) == [16.0] * 4
    finally:
        client.set_breakpoints(str(FIXTURE), [])
        if any(g["name"] == "first3" for g in client.get("/v1/groups")):  # made only if it got that far
            client.request("DELETE", "/v1/groups/first3")
        client.post("/v1/continue", {})
        for a in ranks:
            ray.kill(a)
