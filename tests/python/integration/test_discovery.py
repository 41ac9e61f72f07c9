"""Live worker discovery on a real local Ray cluster, through the real broker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import ranked_job
import ray
from helpers import broker_command, broker_env, wait_until


def live(client, pred):
    return [w for w in client.workers() if w["state"] != "exited" and pred(w)]


@pytest.fixture(scope="module")
def trainers(ray_cluster):
    cls = ray.remote(num_cpus=1)(ranked_job.RankedTrainer)
    actors = [cls.remote(r, 4) for r in range(4)]
    pids = ray.get([a.pid.remote() for a in actors])
    yield actors, pids
    for a in actors:
        ray.kill(a)


@pytest.mark.smoke
def test_four_ranked_actors_appear_with_real_pids_and_ranks_within_10s(client, trainers):
    actors, pids = trainers
    found = wait_until(
        lambda: (
            {
                w["rank"]: w
                for w in live(client, lambda w: w["actor_class"] == "RankedTrainer" and w["rank"] is not None)
            }
            if len(live(client, lambda w: w["actor_class"] == "RankedTrainer" and w["rank"] is not None)) == 4
            else None
        ),
        timeout=10,
        message="4 ranked RankedTrainer workers",
    )
    assert sorted(found) == [0, 1, 2, 3]
    assert [found[r]["pid"] for r in range(4)] == pids
    for w in found.values():
        assert w["agent"] is True and w["world_size"] == 4
        assert w["actor_id"] and w["node_id"] and w["node_ip"] == "127.0.0.1" and w["job_id"]
        assert w["python"] == ".".join(map(str, sys.version_info[:3]))
        assert w["state"] in ("idle", "running") and w["last_seen"]


def test_plain_task_worker_appears_running_with_task_name(client, ray_cluster):
    ref = ray.remote(ranked_job.slow_task).remote(8.0)
    w = wait_until(
        lambda: live(client, lambda w: w["task"] == "slow_task" and w["state"] == "running"),
        timeout=15,
        message="a running slow_task worker",
    )[0]
    assert w["actor_id"] is None and w["agent"] is True
    assert ray.get(ref) == w["pid"]


def test_killed_actor_turns_exited(client, ray_cluster):
    a = ray.remote(num_cpus=1)(ranked_job.RankedTrainer).remote(9, 10)
    pid = ray.get(a.pid.remote())
    wid = wait_until(
        lambda: live(client, lambda w: w["pid"] == pid and w["rank"] == 9),
        timeout=10,
        message="the rank-9 actor listed live",
    )[0]["id"]
    ray.kill(a)
    # By id: an ended worker of an earlier test may have had the same pid (CI, stop 36).
    w = wait_until(
        lambda: [w for w in client.workers() if w["id"] == wid and w["state"] == "exited"],
        timeout=15,
        message="the killed actor exited",
    )[0]
    assert w["rank"] == 9


def test_rank_from_env_vars_in_runtime_env(client, ray_cluster):
    a = (
        ray.remote(num_cpus=1)(ranked_job.EnvRanked)
        .options(runtime_env={"env_vars": {"RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "6"}})
        .remote()
    )
    pid = ray.get(a.pid.remote())
    w = wait_until(
        lambda: live(client, lambda w: w["pid"] == pid and w["rank"] == 5),
        timeout=10,
        message="env-ranked worker",
    )[0]
    assert (w["local_rank"], w["world_size"]) == (1, 6)
    ray.kill(a)


def test_worker_without_agent_is_listed_and_marked(client, ray_cluster):
    a = (
        ray.remote(num_cpus=1)(ranked_job.EnvRanked)
        .options(runtime_env={"env_vars": {"RAYSLEUTH": "0"}})
        .remote()
    )
    pid = ray.get(a.pid.remote())
    w = wait_until(  # its class comes from Ray's state API, a poll after the pid
        lambda: live(client, lambda w: w["pid"] == pid and w["actor_class"]),
        timeout=15,
        message="the agent-less worker with its actor class",
    )[0]
    assert w["agent"] is False and w["actor_class"] == "EnvRanked"
    ray.kill(a)


def test_setup_hook_activation_keeps_the_users_own_hook(client, ray_cluster):
    from helpers import FIXTURES

    job = subprocess.Popen(
        [sys.executable, str(FIXTURES / "hooked_job.py"), ray_cluster.address_info["gcs_address"]],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "RAYSLEUTH": "0"},
    )
    try:
        line = job.stdout.readline()
        while line and not line.startswith("{"):  # Ray may print a line of its own first
            line = job.stdout.readline()
        assert line, f"the job ended without its JSON line (exit status {job.poll()})"
        info = json.loads(line)
        assert info["hook_ran"] == "yes"
        wait_until(
            lambda: live(
                client, lambda w: w["pid"] == info["pid"] and w["agent"] and w["actor_class"] == "Hooked"
            ),
            timeout=10,
            message="hooked worker reported by its agent",
        )
    finally:
        job.stdin.close()
        job.wait(60)


def test_idle_agent_imports_no_debugger_and_traces_nothing(trainers):
    actors, _ = trainers
    probe = ray.get(actors[0].probe.remote())
    assert probe == {
        "debugpy_imported": False,
        "pydevd_imported": False,
        "trace": False,
        "profile": False,
        "threading_trace": False,
        "agent_threads": ["raysleuth-agent"],
        "monitoring": [],
    }


def test_agent_writes_nothing_to_the_workers_stdout_or_stderr(client, trainers, ray_cluster):
    _, pids = trainers
    logs = Path(ray_cluster.address_info["session_dir"]) / "logs"
    for w in live(client, lambda w: w["pid"] in pids):
        for out in logs.glob(f"worker-{w['id']}-*"):
            if out.suffix in (".out", ".err"):
                text = out.read_text(errors="replace")
                assert "raysleuth" not in text.lower(), f"{out.name}: {text[-500:]}"
    assert list(logs.glob("raysleuth-agent-*.log")), "agent logs go to their own files"


def test_http_without_token_is_401_json(broker):
    req = urllib.request.Request(broker.http + "/v1/workers")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=5)
    assert err.value.code == 401
    body = json.load(err.value)
    assert body["error"] and "token" in body["hint"]
    bad = urllib.request.Request(broker.http + "/v1/nodes", headers={"Authorization": "Bearer nope"})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(bad, timeout=5)
    assert err.value.code == 401


def test_nodes_lists_the_head_with_its_workers(client, trainers):
    [node] = client.nodes()
    assert node["alive"] and node["node_ip"] == "127.0.0.1" and node["workers"] >= 4


def test_stream_sends_workers_events(broker, client, ray_cluster):
    req = urllib.request.Request(
        broker.http + "/v1/stream", headers={"Authorization": f"Bearer {broker.token}"}
    )
    with urllib.request.urlopen(req, timeout=20) as resp:
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        assert resp.readline().decode().strip() == "event: workers"
        first = json.loads(resp.readline().decode().removeprefix("data: "))
        assert isinstance(first, list)
        a = ray.remote(num_cpus=1)(ranked_job.RankedTrainer).remote(42, 43)
        pid = ray.get(a.pid.remote())
        # The next workers events must bring the new rank-42 worker without a new request.
        while True:
            line = resp.readline().decode()
            if line.startswith("data: "):
                ws = json.loads(line.removeprefix("data: "))
                if any(w["pid"] == pid and w["rank"] == 42 for w in ws):
                    break
        ray.kill(a)


def test_second_broker_for_the_same_cluster_is_refused(broker, ray_cluster, tmp_path):
    proc = subprocess.run(
        broker_command(tmp_path, ray_cluster.address_info["gcs_address"]),
        capture_output=True,
        text=True,
        timeout=120,
        env=broker_env(),
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert "Another Ray Sleuth broker already runs" in proc.stderr


def test_cli_list_prints_ranks_and_json(broker, trainers):
    env = {**os.environ, "RAYSLEUTH_TOKEN": broker.token, "RAYSLEUTH": "0"}
    out = subprocess.run(
        [sys.executable, "-m", "raysleuth", "list", "--broker", broker.http],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0].split()[:6] == ["NODE", "PID", "ACTOR", "TASK", "RANK", "STATE"]
    for pid in trainers[1]:
        assert str(pid) in out.stdout
    js = subprocess.run(
        [sys.executable, "-m", "raysleuth", "list", "--json", "--broker", broker.http],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert {w["pid"] for w in json.loads(js.stdout)} >= set(trainers[1])
    bad = subprocess.run(
        [sys.executable, "-m", "raysleuth", "list", "--broker", broker.http],
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "RAYSLEUTH_TOKEN": "x"},
    )
    assert bad.returncode == 2 and "token" in bad.stderr.lower()
