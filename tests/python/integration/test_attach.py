"""Click to attach: the broker's DAP front door, node relay and lazy loopback debugpy, for real."""

from __future__ import annotations

import asyncio
import ipaddress

import psutil
import pytest
import ranked_job
import ray
from helpers import FIXTURES, dap_address, live_worker, marker_line, stopped_frames, wait_until

from raysleuth.dap.client import DapClient, DapError, open_session

JOB = str(FIXTURES / "ranked_job.py")
STEP_LINE = marker_line(JOB, "step-loop")


@pytest.fixture(scope="module")
def ranked(ray_cluster, client):
    cls = ray.remote(num_cpus=1)(ranked_job.RankedTrainer)
    actors = [cls.remote(100 + r, 2) for r in range(2)]
    pids = ray.get([a.pid.remote() for a in actors])

    def ranks_live() -> set:
        return {w["rank"] for w in client.workers() if w["pid"] in pids and w["state"] != "exited"}

    wait_until(  # each rank held by a live worker of these two: what an attach by rank looks up
        lambda: ranks_live() == {100, 101},
        timeout=30,
        message="ranked attach targets listed",
    )
    yield actors, pids
    for a in actors:
        ray.kill(a)


def is_loopback(ip: str) -> bool:
    addr = ipaddress.ip_address(ip)
    return addr.is_loopback or bool(getattr(addr, "ipv4_mapped", None) and addr.ipv4_mapped.is_loopback)


def rows_of(client, pids) -> list:
    keys = ("id", "pid", "rank", "state", "agent", "last_seen", "actor_class", "job_id")
    return [{k: w.get(k) for k in keys} for w in client.workers() if w["pid"] in pids]


def worker_by_pid(client, pid):
    return next(w for w in client.workers() if w["pid"] == pid)


@pytest.mark.smoke
async def test_attach_by_rank_stops_at_breakpoint_and_evaluates(broker, client, ranked):
    actors, pids = ranked
    host, port = dap_address(broker)
    try:
        s = await open_session(
            host, port, {"token": broker.token, "rank": 100}, breakpoints={JOB: [{"line": STEP_LINE}]}
        )
    except DapError as exc:  # a rank that read as gone once under load: say what the table holds
        raise AssertionError(f"{exc}; the broker's rows of {pids} now: {rows_of(client, pids)}") from None
    try:
        ref = actors[0].step.remote(3)
        tid, frames = await stopped_frames(s)
        assert frames[0]["line"] == STEP_LINE and frames[0]["source"]["path"] == JOB
        ev = await s.request(
            "evaluate", {"expression": "step * 10", "frameId": frames[0]["id"], "context": "repl"}
        )
        assert ev["body"]["result"] == "30"
        paused = await asyncio.to_thread(
            wait_until,
            lambda: (w := worker_by_pid(client, pids[0]))["state"] == "paused" and w["paused_at"] and w,
            10,
            0.1,
            "paused state",
        )
        assert paused["paused_at"]["line"] == STEP_LINE
        await s.request("setBreakpoints", {"source": {"path": JOB}, "breakpoints": []})
        await s.request("continue", {"threadId": tid})
        assert await asyncio.wait_for(ref, 30) == sum(i * 3 for i in range(1000))
    finally:
        await s.request("disconnect", {}, check=False)
        await s.close()


async def test_bad_token_fails_attach_with_message(broker, ranked):
    host, port = dap_address(broker)
    c = await DapClient.connect(host, port)
    try:
        await c.request("initialize", {"adapterID": "raysleuth"})
        with pytest.raises(DapError, match="token is missing or wrong"):
            await c.request("attach", {"token": "nope", "rank": 100})
        with pytest.raises(DapError, match="No live worker has rank 999"):
            await c.request("attach", {"token": broker.token, "rank": 999})
        with pytest.raises(DapError, match="needs an attached worker"):
            await c.request("threads", {})
    finally:
        await c.close()


async def test_two_sessions_at_once_and_second_on_same_worker_is_refused(broker, ranked):
    actors, pids = ranked
    host, port = dap_address(broker)
    bps = {JOB: [{"line": STEP_LINE}]}
    s0 = await open_session(host, port, {"token": broker.token, "rank": 100}, breakpoints=bps)
    s1 = await open_session(host, port, {"token": broker.token, "rank": 101}, breakpoints=bps)
    try:
        with pytest.raises(DapError, match="being debugged by another session"):
            await open_session(host, port, {"token": broker.token, "rank": 101})
        refs = [a.step.remote(2) for a in actors]
        for s in (s0, s1):
            ev = await s.wait_event("stopped", timeout=30)
            frames = (await s.request("stackTrace", {"threadId": ev["body"]["threadId"]}))["body"]
            assert frames["stackFrames"][0]["line"] == STEP_LINE
        # Ending a session leaves its worker running (breakpoints cleared, thread continued).
        for s in (s0, s1):
            await s.request("disconnect", {})
        assert await asyncio.wait_for(asyncio.gather(*refs), 30) == [sum(i * 2 for i in range(1000))] * 2
        # ...and the next step does not stop any more.
        assert await asyncio.wait_for(actors[0].step.remote(1), 30) == sum(range(1000))
    finally:
        await s0.close()
        await s1.close()


async def test_attach_by_worker_id_and_debugpy_listens_on_loopback_only(broker, client, ranked):
    actors, pids = ranked
    w = worker_by_pid(client, pids[1])
    host, port = dap_address(broker)
    s = await open_session(host, port, {"token": broker.token, "worker": w["id"]})
    try:
        threads = (await s.request("threads", {}))["body"]["threads"]
        assert threads
        listening = [
            c.laddr
            for c in psutil.Process(pids[1]).net_connections(kind="inet")
            if c.status == psutil.CONN_LISTEN
        ]
        assert listening, "the attached worker has a debugpy listener"
        assert all(is_loopback(addr.ip) for addr in listening), listening
        # The in-process adapter: no debugpy adapter process that could outlive the worker.
        assert psutil.Process(pids[1]).children(recursive=True) == []
    finally:
        await s.request("disconnect", {}, check=False)
        await s.close()


async def test_killing_worker_mid_session_ends_the_session_cleanly(broker, client, ray_cluster):
    a = ray.remote(num_cpus=1)(ranked_job.RankedTrainer).remote(200, 1)
    pid = await a.pid.remote()
    await asyncio.to_thread(
        wait_until, lambda: any(w["pid"] == pid and w["rank"] == 200 for w in client.workers()), 10
    )
    host, port = dap_address(broker)
    s = await open_session(
        host, port, {"token": broker.token, "rank": 200}, breakpoints={JOB: [{"line": STEP_LINE}]}
    )
    try:
        a.step.remote(1)
        await s.wait_event("stopped", timeout=30)
        ray.kill(a)
        await s.wait_event("terminated", timeout=30)
        out = [e["body"]["output"] for e in s.events if e["event"] == "output"]
        assert any("ended" in o and f"pid={pid}" in o and "on purpose" in o for o in out), out
        # What the editor asks as the session ends answers without an error toast each (the
        # console line above says why once): no threads, and a quiet failure.
        threads = await s.request("threads", {})
        assert threads["body"]["threads"] == []
        trace = await s.request("stackTrace", {"threadId": 1}, check=False)
        assert not trace["success"] and trace["body"]["error"]["showUser"] is False, trace
        assert "session ended" in trace["message"], trace
        # The broker runs on and serves others.
        assert client.workers() is not None
    finally:
        await s.close()


async def test_worker_paused_by_plain_breakpoint_is_listed_and_attachable(broker, client, ray_cluster):
    line = marker_line(JOB, "plain-breakpoint")
    ref = ray.remote(ranked_job.task_with_breakpoint).remote(20)

    def paused():
        ws = [
            w
            for w in client.workers()
            if w["state"] == "paused"
            and w["paused_at"]
            and w["paused_at"]["line"] == line
            and w["task"] == "task_with_breakpoint"
        ]
        return ws[0] if ws else None

    w = await asyncio.to_thread(wait_until, paused, 20, 0.1, "a worker paused in breakpoint()")
    assert w["paused_at"]["path"] == JOB
    host, port = dap_address(broker)
    s = await open_session(host, port, {"token": broker.token, "worker": w["id"]})
    try:
        ev = await s.wait_event("stopped", timeout=30)
        frames = (await s.request("stackTrace", {"threadId": ev["body"]["threadId"]}))["body"]["stackFrames"]
        user = [f for f in frames if f["source"].get("path") == JOB]
        assert user and user[0]["line"] in (line, line + 1)
        got = await s.request("evaluate", {"expression": "y", "frameId": user[0]["id"], "context": "repl"})
        assert got["body"]["result"] == "40"
        await s.request("continue", {"threadId": ev["body"]["threadId"]})
        assert await asyncio.wait_for(ref, 30) == 41
    finally:
        await s.request("disconnect", {}, check=False)
        await s.close()
    listening = [
        c.laddr
        for c in psutil.Process(w["pid"]).net_connections(kind="inet")
        if c.status == psutil.CONN_LISTEN
    ]
    assert all(is_loopback(a.ip) for a in listening), listening


def test_terminal_debugger_shows_stopped_line_and_evaluates(broker, ranked):
    import os
    import sys

    import pexpect

    actors, _ = ranked
    env = {**os.environ, "RAYSLEUTH_TOKEN": broker.token, "RAYSLEUTH": "0"}
    child = pexpect.spawn(
        sys.executable,
        ["-m", "raysleuth", "attach", "--rank", "101", "--broker", broker.http],
        env=env,
        encoding="utf-8",
        timeout=60,
        logfile=sys.stderr,
    )
    try:
        child.expect(r"attached to rank 101")
        child.expect_exact("(sleuth) ")
        child.sendline(f"break {JOB}:{STEP_LINE} if step == 7")
        child.expect(r"breakpoint 1 at .*ranked_job.py:\d+")
        child.expect_exact("(sleuth) ")
        ref = actors[1].step.remote(7)
        child.expect(r"stopped \(breakpoint\)")
        child.expect(rf"ranked_job.py:{STEP_LINE} in step")
        child.expect(r"for i in range\(1000\)")
        child.sendline("p step + 35")
        child.expect(r"\b42\b")
        child.sendline("where")
        child.expect(r"\*  0 step at ")
        child.sendline("locals")
        child.expect(r"step = 7")
        child.sendeof()  # end of input detaches; the worker runs on
        child.expect("detached; the worker runs on")
        child.expect(pexpect.EOF)
        assert ray.get(ref, timeout=30) == sum(i * 7 for i in range(1000))
    finally:
        child.close(force=True)


async def test_working_dir_copy_is_mapped_to_the_editors_folder_automatically(
    broker, client, ray_cluster, tmp_path
):
    import json
    import os
    import shutil
    import subprocess
    import sys

    local = tmp_path / "project"
    local.mkdir()
    shutil.copy(FIXTURES / "mapped_job.py", local / "mapped_job.py")
    job = subprocess.Popen(
        [
            sys.executable,
            str(FIXTURES / "mapped_driver.py"),
            ray_cluster.address_info["gcs_address"],
            str(local),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "RAYSLEUTH": "0"},
    )
    try:
        info = json.loads(await asyncio.to_thread(job.stdout.readline))
        remote_cwd = info["cwd"]
        assert remote_cwd != str(local) and "working_dir_files" in remote_cwd
        await asyncio.to_thread(
            wait_until,
            lambda: any(w["pid"] == info["pid"] and w["cwd"] == remote_cwd for w in client.workers()),
            15,
        )
        local_file = str(local / "mapped_job.py")
        line = marker_line(local_file, "mapped-loop")
        host, port = dap_address(broker)
        s = await open_session(
            host,
            port,
            {"token": broker.token, "rank": 300, "localRoot": str(local)},
            breakpoints={local_file: [{"line": line}]},
        )
        try:
            out = [e["body"]["output"] for e in s.events if e["event"] == "output"]
            assert any("mapping" in o and remote_cwd in o for o in out), out
            job.stdin.write("work 5\n")
            job.stdin.flush()
            ev = await s.wait_event("stopped", timeout=30)
            top = (await s.request("stackTrace", {"threadId": ev["body"]["threadId"]}))["body"][
                "stackFrames"
            ][0]
            assert (top["source"]["path"], top["line"]) == (local_file, line)
            await s.request("disconnect", {})
            assert json.loads(await asyncio.to_thread(job.stdout.readline)) == {"result": 10}
        finally:
            await s.close()
    finally:
        job.stdin.close()
        await asyncio.to_thread(job.wait, 60)


async def test_attach_steps_show_as_progress_not_as_debug_console_lines(broker, client, ray_cluster):
    """A client that shows DAP progress (VS Code) gets the long attach's steps there; a worker
    nobody attached to yet, so the link is opened for this session."""
    a = ray.remote(num_cpus=0)(ranked_job.RankedTrainer).remote(731, 1)
    pid = ray.get(a.pid.remote())
    w = wait_until(
        lambda: next((w for w in client.workers() if w["pid"] == pid and w["rank"] == 731), None), 10
    )
    host, port = dap_address(broker)
    c = await DapClient.connect(host, port)
    try:
        await c.request("initialize", {"adapterID": "raysleuth", "supportsProgressReporting": True})
        await c.request("attach", {"token": broker.token, "worker": w["id"]}, timeout=90)
        await c.wait_event("initialized", timeout=30)
        seen = list(c.events)
        kinds = [e["event"] for e in seen if e["event"].startswith("progress")]
        assert kinds[0] == "progressStart" and kinds[-1] == "progressEnd", kinds
        start = next(e for e in seen if e["event"] == "progressStart")["body"]
        assert start["title"] == "Ray Sleuth" and "debugger" in start["message"]
        assert not [e for e in seen if e["event"] == "output" and "debugpy" in e["body"]["output"]]
        await c.request("disconnect", {})
    finally:
        await c.close()
        ray.kill(a)


async def test_an_attach_to_a_worker_listed_before_its_agent_waits_for_the_agent(broker, client, ray_cluster):
    """Issue 25, item 9: Ray lists a worker before its agent registers; an attach in that window
    says it waits and goes on once the agent comes, instead of answering "no agent". (A worker of
    the same job with an agent is what tells the broker one is expected.)"""
    peer = ray.remote(num_cpus=0)(ranked_job.RankedTrainer).remote(732, 1)
    peer_pid = ray.get(peer.pid.remote())
    wait_until(
        lambda: any(w["pid"] == peer_pid and w["agent"] for w in client.workers()), 30, 0.2, "a peer agent"
    )
    a = (
        ray.remote(num_cpus=0)(ranked_job.LateAgent)
        .options(runtime_env={"env_vars": {"RAYSLEUTH": "0"}})
        .remote()
    )
    pid = ray.get(a.pid.remote())
    w = live_worker(client, pid, 30)
    assert not w["agent"]
    host, port = dap_address(broker)
    c = await DapClient.connect(host, port)
    try:
        await c.request("initialize", {"adapterID": "raysleuth", "supportsProgressReporting": True})
        attach = asyncio.ensure_future(
            c.request("attach", {"token": broker.token, "worker": w["id"]}, timeout=60)
        )
        waiting = await c.wait_event(
            None, lambda body: "waiting for the Ray Sleuth agent" in str(body.get("message")), timeout=30
        )
        assert f"pid {pid}" in waiting["body"]["message"] and not attach.done()
        assert await asyncio.to_thread(ray.get, a.start_agent.remote(), timeout=60)
        await attach
        await c.wait_event("initialized", timeout=30)
        assert next(x for x in client.workers() if x["pid"] == pid)["agent"]
        await c.request("disconnect", {})
    finally:
        await c.close()
        ray.kill(a)
        ray.kill(peer)
