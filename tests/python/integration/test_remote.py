"""A broker on a remote head node, reached through one tunnelled port (ssh -L, kubectl port-forward).

A few lines of asyncio stand in for the tunnel: a TCP forwarder on another local port that
knows only the broker's HTTP port. Everything an editor needs, the HTTP API with the token and
a DAP session, must work through it (broker/oneport.py).
"""

from __future__ import annotations

import asyncio
import contextlib

import aiohttp
import pytest
import ranked_job
import ray
from helpers import FIXTURES, marker_line, stopped_frames, wait_until

from raysleuth.dap.client import DapClient, DapError, open_session

JOB = str(FIXTURES / "ranked_job.py")
STEP_LINE = marker_line(JOB, "step-loop")
RANK = 300


@contextlib.asynccontextmanager
async def tcp_forwarder(target_host: str, target_port: int):
    """What `ssh -L PORT:target_host:target_port` does, on 127.0.0.1: yields the local port and
    the number of connections it carried."""
    carried = []

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(target_host, target_port)
        carried.append(writer.get_extra_info("peername"))
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1], carried
    finally:
        server.close()


def http_port(broker) -> tuple[str, int]:
    host, port = broker.http.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


@pytest.fixture(scope="module")
def remote_rank(ray_cluster, client):
    actor = ray.remote(num_cpus=1)(ranked_job.RankedTrainer).remote(RANK, 1)
    pid = ray.get(actor.pid.remote())
    wait_until(
        lambda: any(w["pid"] == pid and w["rank"] == RANK for w in client.workers()),
        timeout=15,
        message=f"rank {RANK} listed",
    )
    yield actor
    ray.kill(actor)


async def test_http_api_through_one_forwarded_port_needs_the_token(broker):
    async with tcp_forwarder(*http_port(broker)) as (port, carried):
        url = f"http://127.0.0.1:{port}/v1/status"
        async with aiohttp.ClientSession() as http:
            async with http.get(url) as res:
                assert res.status == 401
            async with http.get(url, headers={"Authorization": f"Bearer {broker.token}"}) as res:
                assert res.status == 200
                status = await res.json()
        assert status["dap_on_http"] is True
        assert len(carried) >= 1


async def test_dap_session_through_the_same_forwarded_port_stops_and_evaluates(broker, remote_rank):
    async with tcp_forwarder(*http_port(broker)) as (port, carried):
        s = await open_session(
            "127.0.0.1", port, {"token": broker.token, "rank": RANK}, breakpoints={JOB: [{"line": STEP_LINE}]}
        )
        try:
            ref = remote_rank.step.remote(4)
            tid, frames = await stopped_frames(s)
            assert frames[0]["line"] == STEP_LINE and frames[0]["source"]["path"] == JOB
            ev = await s.request(
                "evaluate", {"expression": "step * 10", "frameId": frames[0]["id"], "context": "repl"}
            )
            assert ev["body"]["result"] == "40"
            await s.request("setBreakpoints", {"source": {"path": JOB}, "breakpoints": []})
            await s.request("continue", {"threadId": tid})
            assert await asyncio.wait_for(ref, 30) == sum(i * 4 for i in range(1000))
        finally:
            await s.request("disconnect", {}, check=False)
            await s.close()
        assert carried, "the session did not go through the forwarder"


async def test_dap_through_the_forwarded_port_refuses_a_wrong_token(broker, remote_rank):
    async with tcp_forwarder(*http_port(broker)) as (port, _):
        c = await DapClient.connect("127.0.0.1", port)
        try:
            await c.request("initialize", {"adapterID": "raysleuth"})
            with pytest.raises(DapError, match="token is missing or wrong"):
                await c.request("attach", {"token": "nope", "rank": RANK})
        finally:
            await c.close()
