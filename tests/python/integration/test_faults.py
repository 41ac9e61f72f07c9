"""Faults a cluster really has: many short-lived actors leave nothing behind in the broker."""

from __future__ import annotations

import sys

import psutil
import pytest
import ray
from helpers import wait_until
from talker import Talker

ROUNDS, PER_ROUND = 5, 20


def footprint(broker, client) -> dict:
    proc = psutil.Process(broker.proc.pid)
    status = client.get("/v1/status")
    return {
        "fds": proc.num_fds(),
        "threads": proc.num_threads(),
        "links": status["links"],
        "reports": status["reports"],
    }


@pytest.mark.skipif(
    sys.version_info >= (3, 12), reason="about the broker, not the trigger: once, in the 3.11 run"
)
def test_a_hundred_actors_started_and_killed_leave_no_sockets_threads_processes_or_entries(
    broker, client, ray_cluster
):
    cls = ray.remote(num_cpus=0)(Talker)
    before = footprint(broker, client)
    pids = []
    for _ in range(ROUNDS):
        actors = [cls.remote() for _ in range(PER_ROUND)]
        pids += ray.get([a.pid.remote() for a in actors], timeout=120)
        for a in actors:
            ray.kill(a)
    assert len(set(pids)) == ROUNDS * PER_ROUND
    wait_until(lambda: not any(psutil.pid_exists(p) for p in pids), 60, 0.5, "every actor process ended")
    wait_until(
        lambda: client.get("/v1/status")["reports"] <= before["reports"] + 2,
        90,
        1.0,
        "the registry forgot them",
    )
    after = footprint(broker, client)
    assert after["links"] <= before["links"]
    assert after["fds"] <= before["fds"] + 8, (before, after)
    assert after["threads"] <= before["threads"] + 4, (before, after)
    listed = {w["pid"]: w["state"] for w in client.workers() if w["pid"] in set(pids)}
    assert set(listed.values()) <= {"exited"}, "an ended actor still listed as alive"


async def test_no_worker_and_not_the_broker_listens_beyond_loopback(broker, client, ray_cluster):
    """Every listening socket of every live worker (one with debugpy open, attached) and of the
    broker is on a loopback address: nothing of Ray Sleuth is reachable from another machine."""
    import asyncio
    import ipaddress

    from helpers import dap_address

    from raysleuth.dap.client import open_session

    a = ray.remote(num_cpus=0)(Talker).remote()
    pid = await a.pid.remote()
    w = await asyncio.to_thread(
        wait_until, lambda: next((x for x in client.workers() if x["pid"] == pid and x["agent"]), None), 15
    )
    host, port = dap_address(broker)
    s = await open_session(host, port, {"token": broker.token, "worker": w["id"]})
    try:
        pids = {x["pid"] for x in client.workers() if x["state"] not in ("exited",) and x["pid"]}
        pids.add(broker.proc.pid)
        listening = []
        for p in pids:
            try:
                conns = psutil.Process(p).net_connections(kind="inet")
            except psutil.NoSuchProcess:
                continue
            listening += [(p, c.laddr.ip, c.laddr.port) for c in conns if c.status == psutil.CONN_LISTEN]
        assert any(p == pid for p, _, _ in listening), "the attached worker's debugpy listens"

        def loopback(ip: str) -> bool:
            addr = ipaddress.ip_address(ip)
            mapped = getattr(addr, "ipv4_mapped", None)  # a dual-stack socket: ::ffff:127.0.0.1
            return addr.is_loopback or bool(mapped and mapped.is_loopback)

        wide = [x for x in listening if not loopback(x[1])]
        assert not wide, f"listening beyond loopback: {wide}"
    finally:
        await s.request("disconnect", {}, check=False)
        await s.close()
        ray.kill(a)
