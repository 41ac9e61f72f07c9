"""Post-mortem: crash capture at the raise site, the hold for attach, the crash store, replay, and
records of hard deaths, through a real cluster, real agents, debugpy and the broker."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time

import crash_job
import pytest
import ray
from helpers import FIXTURES, dap_address, live_worker_id, marker_line, stopped_frames, wait_until

from raysleuth.dap.client import open_session
from raysleuth.shared.peer import check_broker_peer

JOB = str(FIXTURES / "crash_job.py")
RAISE_LINE = marker_line(JOB, "crash-raise")
LOCALS_LINE = marker_line(JOB, "crash-locals")


def new_crasher(rank: int, hold: str | None = None, **env_vars: str):
    env = dict(env_vars, **({"RAYSLEUTH_POSTMORTEM_HOLD": hold} if hold is not None else {}))
    cls = ray.remote(num_cpus=0, max_restarts=0)(crash_job.Crasher)
    return cls.options(runtime_env={"env_vars": env}).remote(rank)


def crashes_of(client, wid: str) -> list[dict]:
    """The records of worker `wid` (by id: an earlier test's worker may have had the same pid)."""
    return [c for c in client.get("/v1/crashes") if (c.get("worker") or {}).get("id") == wid]


class Watcher:
    """A client on the broker's event stream (the hold applies only while someone watches)."""

    def __init__(self, broker) -> None:
        from urllib.parse import urlsplit

        self.events: list[tuple[str, dict]] = []
        u = urlsplit(broker.http)
        self.sock = socket.create_connection((u.hostname, u.port), timeout=60)
        check_broker_peer(self.sock, broker.http)  # the token goes to a broker of ours only (#37)
        auth = f"Authorization: Bearer {broker.token}"
        self.sock.sendall(f"GET /v1/stream HTTP/1.1\r\nHost: {u.netloc}\r\n{auth}\r\n\r\n".encode())
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        event = None
        with contextlib.suppress(Exception), self.sock.makefile("rb") as f:
            for raw in f:
                line = raw.decode(errors="replace").strip()
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: ") and event:
                    with contextlib.suppress(ValueError):
                        self.events.append((event, json.loads(line[6:])))

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


@pytest.fixture
def watcher(broker, client):
    w = Watcher(broker)
    wait_until(lambda: client.get("/v1/status")["watchers"] >= 1, 10, message="the stream watched")
    yield w
    w.close()
    wait_until(lambda: client.get("/v1/status")["watchers"] == 0, 10, message="the stream left")


def test_exception_gives_a_record_with_the_raise_frame_locals(ray_cluster, client):
    a = new_crasher(200, RAYSLEUTH_NVML="fake_nvml")  # NVML's seam: no GPU on this machine
    wid = live_worker_id(client, ray.get(a.pid.remote()))
    with pytest.raises(ray.exceptions.RayTaskError) as info:
        ray.get(a.fail.remote(4), timeout=60)
    assert isinstance(info.value.cause, ZeroDivisionError)
    rec = wait_until(lambda: crashes_of(client, wid), 15, message="a crash record")[0]
    assert rec["kind"] == "exception" and rec["exc_type"] == "ZeroDivisionError"
    assert rec["worker"]["rank"] == 200 and rec["hint"]
    full = client.get(f"/v1/crashes/{rec['id']}")
    top = full["frames"][0]
    assert (top["path"], top["line"], top["function"]) == (JOB, RAISE_LINE, "_divide")
    assert top["locals"]["total"] == "4" and top["locals"]["scale"] == "0.0"
    assert full["frames"][1]["locals"].get("batch") == "[0, 1, 2, 3]", [
        (f["function"], f["line"], list(f["locals"])) for f in full["frames"]
    ]
    assert all("ray/_private" not in f["path"] for f in full["frames"])
    assert "ZeroDivisionError" in full["traceback"]
    assert full["capture_ms"] < 1000
    on_timeline = [e for e in client.get("/v1/events?name=crash") if e["fields"]["crash"] == rec["id"]]
    assert [(e["rank"], e["fields"]["kind"], e["fields"]["error"]) for e in on_timeline] == [
        (200, "exception", "ZeroDivisionError")
    ]
    gpu = full["gpu"]["gpus"][0]  # the fake's numbers, read through the agent's NVML path
    assert (gpu["used_bytes"], gpu["device_used_bytes"], gpu["uuid"]) == (3 << 30, 5 << 30, "GPU-fake-0")
    # The actor lives on: the exception was Ray's usual task error, nothing more.
    assert ray.get(a.ok.remote(), timeout=30) == "fine"
    with pytest.raises(Exception) as nf:
        client.get("/v1/crashes/no-such-crash")
    assert getattr(nf.value, "status", None) == 404
    ray.kill(a)


@pytest.mark.smoke
async def test_held_crash_attach_stops_at_raise_frame_and_continue_delivers_error(broker, client, watcher):
    a = new_crasher(201, hold="60")
    pid = await asyncio.wait_for(a.pid.remote(), 30)
    ref = a.fail.remote(3)
    held = await asyncio.to_thread(
        wait_until,
        lambda: next((w for w in client.workers() if w["pid"] == pid and w["state"] == "crashed"), None),
        20,
        0.1,
        "the worker held as crashed",
    )
    assert held["paused_at"]["line"] == RAISE_LINE and held["crash"] and held["held_until"]
    # The record's own stream event says it is held, and until when (the worker's 60 s).
    ev = await asyncio.to_thread(
        wait_until,
        lambda: next((d for e, d in watcher.events if e == "crash" and d["id"] == held["crash"]), None),
        10,
    )
    assert ev["held_until"] == pytest.approx(time.time() + 60, abs=15)
    host, port = dap_address(broker)
    s = await open_session(host, port, {"token": broker.token, "crash": held["crash"]})
    try:
        stopped = await s.wait_event("stopped", timeout=30)
        assert stopped["body"]["reason"] == "exception"
        tid = stopped["body"]["threadId"]
        frames = (await s.request("stackTrace", {"threadId": tid}))["body"]["stackFrames"]
        assert frames[0]["line"] == RAISE_LINE and frames[0]["source"]["path"] == JOB
        info = (await s.request("exceptionInfo", {"threadId": tid}))["body"]
        assert "ZeroDivisionError" in info["exceptionId"]
        ev = await s.request(
            "evaluate", {"expression": "total * 10", "frameId": frames[0]["id"], "context": "repl"}
        )
        assert ev["body"]["result"] == "30"
        ready, _ = ray.wait([ref], timeout=0)
        assert not ready, "the task waits in the hold: its error has not reached the caller yet"
        await s.request("continue", {"threadId": tid})
        with pytest.raises(ray.exceptions.RayTaskError) as err:
            await asyncio.wait_for(ref, 30)
        assert isinstance(err.value.cause, ZeroDivisionError)
    finally:
        await s.request("disconnect", {}, check=False)
        await s.close()
    ray.kill(a)


async def test_attach_on_the_crash_event_is_live(broker, client, watcher):
    """A client that attaches the moment the `crash` event arrives (the extension's Inspect) gets
    the held worker, not a replay: the record may come before the worker's own report."""
    a = new_crasher(208, hold="60")
    pid = await asyncio.wait_for(a.pid.remote(), 30)
    ref = a.fail.remote(5)
    ev = await asyncio.to_thread(
        wait_until,
        lambda: next(
            (d for e, d in watcher.events if e == "crash" and (d.get("worker") or {}).get("pid") == pid), None
        ),
        20,
        0.01,
        "the crash event",
    )
    host, port = dap_address(broker)
    s = await open_session(host, port, {"token": broker.token, "crash": ev["id"]})
    try:
        tid, frames = await stopped_frames(s)
        ev = await s.request(
            "evaluate", {"expression": "total * 10", "frameId": frames[0]["id"], "context": "repl"}
        )
        assert ev["body"]["result"] == "50", ev  # computed in the worker: a replay cannot
        await s.request("continue", {"threadId": tid})
        with pytest.raises(ray.exceptions.RayTaskError):
            await asyncio.wait_for(ref, 30)
    finally:
        await s.request("disconnect", {}, check=False)
        await s.close()
    ray.kill(a)


def test_short_hold_times_out_and_the_job_goes_on(client, watcher):
    a = new_crasher(202, hold="1")
    with pytest.raises(ray.exceptions.RayTaskError):
        ray.get(a.fail.remote(2), timeout=60)
    assert ray.get(a.ok.remote(), timeout=30) == "fine"
    ray.kill(a)


def test_no_hold_without_a_watcher(client):
    assert client.get("/v1/status")["watchers"] == 0
    a = new_crasher(203, hold="120")
    with pytest.raises(ray.exceptions.RayTaskError):
        ray.get(a.fail.remote(2), timeout=30)  # well under the hold: nobody watches, no wait
    rec = wait_until(
        lambda: next((c for c in client.get("/v1/crashes") if c["worker"].get("rank") == 203), None), 10
    )
    assert rec["held_until"] is None
    ray.kill(a)


@pytest.mark.smoke
async def test_replay_after_ray_kill_shows_stack_and_locals(broker, client):
    a = new_crasher(204)
    wid = await asyncio.to_thread(live_worker_id, client, await asyncio.wait_for(a.pid.remote(), 30))
    with pytest.raises(ray.exceptions.RayTaskError):
        await asyncio.wait_for(a.fail.remote(5), 60)
    rec = (await asyncio.to_thread(wait_until, lambda: crashes_of(client, wid), 15, 0.1, "a record"))[0]
    ray.kill(a)
    await asyncio.to_thread(
        wait_until,
        lambda: any(w["id"] == wid and w["state"] == "exited" for w in client.workers()),
        30,
        0.2,
        "the worker gone",
    )
    host, port = dap_address(broker)
    s = await open_session(host, port, {"token": broker.token, "crash": rec["id"]})
    try:
        stopped = await s.wait_event("stopped", timeout=10)
        assert stopped["body"]["reason"] == "exception"
        threads = (await s.request("threads", {}))["body"]["threads"]
        frames = (await s.request("stackTrace", {"threadId": threads[0]["id"]}))["body"]["stackFrames"]
        assert [f["line"] for f in frames[:2]] == [RAISE_LINE, marker_line(JOB, "crash-locals") + 2]
        scopes = (await s.request("scopes", {"frameId": frames[0]["id"]}))["body"]["scopes"]
        variables = (await s.request("variables", {"variablesReference": scopes[0]["variablesReference"]}))[
            "body"
        ]
        values = {v["name"]: v["value"] for v in variables["variables"]}
        assert values["total"] == "5" and values["scale"] == "0.0"
        stored = await s.request("evaluate", {"expression": "total", "frameId": frames[0]["id"]})
        assert stored["body"]["result"] == "5"
        gone = await s.request(
            "evaluate", {"expression": "total + 1", "frameId": frames[0]["id"]}, check=False
        )
        assert not gone["success"] and "process has exited" in gone["message"]
        assert gone["body"]["error"]["showUser"] is True  # asked in the Debug Console: said there
        hovered = {"expression": "total + 1", "frameId": frames[0]["id"], "context": "hover"}
        hover = await s.request("evaluate", hovered, check=False)
        assert not hover["success"] and hover["body"]["error"]["showUser"] is False  # no toast (issue 25)
        # Continue (a toolbar click) runs nothing and loses nothing: the session stops again at the scene.
        cont = await s.request("continue", {"threadId": 1})
        assert cont["success"]
        again = await s.wait_event("stopped", timeout=10)
        assert again["body"]["reason"] == "exception" and again["body"]["threadId"] == threads[0]["id"]
        frames_again = (await s.request("stackTrace", {"threadId": threads[0]["id"]}))["body"]["stackFrames"]
        assert [f["line"] for f in frames_again[:1]] == [RAISE_LINE]
        info = (await s.request("exceptionInfo", {"threadId": 1}))["body"]
        assert info["exceptionId"] == "ZeroDivisionError"
        trace = info["details"]["stackTrace"]  # as a live stop shows it: Ray's executor cut (issue 25)
        assert "ZeroDivisionError" in trace and "_raylet" not in trace and "crash_job.py" in trace, trace
    finally:
        await s.request("disconnect", {}, check=False)
        await s.close()


def reported_crasher(client, rank: int):
    """A Crasher whose agent has sent its first heartbeat (a hard death is recorded with the
    last one): (actor, pid, worker id)."""
    a = new_crasher(rank)
    pid = ray.get(a.pid.remote(), timeout=30)
    return a, pid, live_worker_id(client, pid, agent=True, rank=rank)


def test_os_exit_gives_worker_died(client):
    a, pid, wid = reported_crasher(client, 205)
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(a.exit_hard.remote(), timeout=60)
    rec = wait_until(lambda: crashes_of(client, wid), 30, message="a worker_died record")[0]
    assert rec["kind"] == "worker_died" and "died" in rec["hint"]
    full = client.get(f"/v1/crashes/{rec['id']}")
    assert full["exit_type"] == "SYSTEM_ERROR" and full["last_report"]["pid"] == pid


def test_sigkill_gives_worker_died(client):
    import os
    import signal

    a, pid, wid = reported_crasher(client, 207)
    os.kill(pid, signal.SIGKILL)  # what the kernel's OOM killer does
    rec = wait_until(lambda: crashes_of(client, wid), 30, message="a record of the SIGKILL")[0]
    assert rec["kind"] == "worker_died" and rec["worker"]["rank"] == 207
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(a.ok.remote(), timeout=30)


def test_segfault_gives_a_record_with_faulthandler_text(client):
    a, pid, wid = reported_crasher(client, 206)
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(a.segfault.remote(), timeout=60)
    rec = wait_until(lambda: crashes_of(client, wid), 30, message="a segfault record")[0]
    assert rec["kind"] == "segfault"
    full = client.get(f"/v1/crashes/{rec['id']}")
    assert "Segmentation fault" in full["faulthandler"]
    assert any(f["function"] == "segfault" and f["path"] == JOB for f in full["frames"])


def test_cli_lists_and_shows_crashes(broker, client):
    import os
    import subprocess
    import sys

    env = dict(os.environ, RAYSLEUTH_TOKEN=broker.token)
    cli = [sys.executable, "-m", "raysleuth", "crashes", "--broker", broker.http]
    listed = json.loads(
        subprocess.run([*cli, "--json"], env=env, capture_output=True, text=True, check=True).stdout
    )
    assert [c["id"] for c in listed] == [c["id"] for c in client.get("/v1/crashes")]
    exc = next(c for c in listed if c["exc_type"] == "ZeroDivisionError")
    table = subprocess.run(cli, env=env, capture_output=True, text=True, check=True).stdout
    assert exc["id"] in table and "ZeroDivisionError" in table
    one = subprocess.run([*cli, exc["id"]], env=env, capture_output=True, text=True, check=True).stdout
    assert f"{JOB}:{RAISE_LINE} in _divide" in one and "scale = 0.0" in one and "hint:" in one
    bad = subprocess.run([*cli, "nope"], env=env, capture_output=True, text=True)
    assert bad.returncode != 0 and "No crash record nope" in bad.stderr


def test_records_survive_a_broker_restart(ray_cluster, broker, client):
    """Last in this module (and in the session's order): the session's broker is replaced by a
    new one over the same state dir, which the remaining fixtures then use."""
    from pathlib import Path

    from raysleuth.broker.process import start_broker

    before = client.get("/v1/crashes")
    assert before, "the tests above left records"
    state_dir = Path(broker.ready["token_file"]).parent
    assert broker.stop() == 0
    fresh = start_broker(state_dir, address=ray_cluster.address_info["gcs_address"])
    broker.proc, broker.ready = fresh.proc, fresh.ready  # the session fixture stops this one
    client.url = fresh.http
    after = client.get("/v1/crashes")
    assert [c["id"] for c in after] == [c["id"] for c in before]
    full = client.get(f"/v1/crashes/{before[-1]['id']}")
    assert full["frames"] is not None and full["kind"] in ("exception", "worker_died", "segfault", "oom")


def test_a_broker_killed_with_sigkill_comes_back_with_its_records_and_points(ray_cluster, broker, client):
    """After the graceful restart above: the broker dies without a word (SIGKILL), a new one
    starts over the same state dir at once. Records and cluster points are intact, live agents
    find the new registry within a bound, and a logpoint set before the kill still prints."""
    from pathlib import Path

    from raysleuth.broker.process import start_broker

    survivor = new_crasher(211)
    pid = ray.get(survivor.pid.remote())
    wait_until(lambda: any(w["pid"] == pid and w["agent"] for w in client.workers()), 15, 0.2, "agent")
    client.set_breakpoints(JOB, [{"line": LOCALS_LINE, "logMessage": "kept {step}"}])
    wait_until(lambda: sum(b["armed"] for b in client.breakpoints()) >= 1, 10, 0.2, "armed")
    records = [c["id"] for c in client.get("/v1/crashes")]
    state_dir = Path(broker.ready["token_file"]).parent
    broker.proc.kill()
    broker.proc.wait(10)
    t0 = time.monotonic()
    fresh = start_broker(state_dir, address=ray_cluster.address_info["gcs_address"])
    broker.proc, broker.ready = fresh.proc, fresh.ready  # the session fixture stops this one
    client.url = fresh.http
    started_s = time.monotonic() - t0
    assert [c["id"] for c in client.get("/v1/crashes")] == records
    assert [(b["line"], b["logMessage"]) for b in client.breakpoints()] == [(LOCALS_LINE, "kept {step}")]
    wait_until(
        lambda: any(w["pid"] == pid and w["agent"] for w in client.workers()), 20, 0.2, "re-registered"
    )
    back_s = time.monotonic() - t0
    with pytest.raises(ray.exceptions.RayTaskError):
        ray.get(survivor.fail.remote(7), timeout=30)
    lines = wait_until(lambda: [r for r in client.get("/v1/logs") if r["message"] == "kept 7"], 10, 0.2)
    assert lines[0]["pid"] == pid
    print(f"broker ready {started_s:.1f} s after SIGKILL, agent back after {back_s:.1f} s")
    client.set_breakpoints(JOB, [])
    ray.kill(survivor)
