"""What an attach waits for (raysleuth/broker/debug/waits.py): a worker Ray lists before its agent
registered is attached once the agent is there (issue 25, item 9), within a bound, saying so."""

from __future__ import annotations

import asyncio

import pytest

from raysleuth.broker.debug import waits
from raysleuth.model.worker import Worker


def table(*rows: list[Worker]):
    """A worker table that answers each row set in turn, then the last one forever."""
    seq = list(rows)

    def workers() -> list[Worker]:
        return seq.pop(0) if len(seq) > 1 else seq[0]

    return workers


PEER = Worker(id="peer", pid=1, job_id="01", node_id="n1", agent=True, state="running")
NEW = Worker(id="new", pid=2, job_id="01", node_id="n1", agent=False, state="idle")
READY = Worker(id="new", pid=2, job_id="01", node_id="n1", agent=True, state="idle")


async def test_waits_for_the_agent_a_peer_makes_expected_and_says_so():
    said: list[str] = []

    async def progress(text: str) -> None:
        said.append(text)

    got = await waits.with_agent(table([PEER, NEW], [PEER, NEW], [PEER, READY]), NEW, progress)
    assert got.agent and got.id == "new"
    assert len(said) == 1 and "waiting for the Ray Sleuth agent of worker pid 2" in said[0]


async def test_no_wait_without_a_peer_with_an_agent_or_for_a_worker_that_has_one():
    async def progress(text: str) -> None:
        raise AssertionError(f"no wait expected: {text}")

    lone = Worker(id="x", pid=3, job_id="02", node_id="n2", agent=False, state="idle")
    assert await waits.with_agent(table([PEER, lone]), lone, progress) is lone
    assert await waits.with_agent(table([PEER, READY]), READY, progress) is READY


async def test_a_bounded_wait_gives_the_worker_back_as_it_is(monkeypatch):
    monkeypatch.setattr(waits, "AGENT_WAIT_S", 0.2)

    async def progress(text: str) -> None:
        pass

    got = await asyncio.wait_for(waits.with_agent(table([PEER, NEW]), NEW, progress), 5)
    assert got is NEW and not got.agent  # the lease then refuses it with the no-agent hint


@pytest.mark.parametrize("gone", ["exited", "missing"])
async def test_a_worker_that_ends_while_waited_for_stops_the_wait(gone):
    async def progress(text: str) -> None:
        pass

    after = (
        [PEER, Worker(id="new", pid=2, job_id="01", agent=False, state="exited")]
        if gone == "exited"
        else [PEER]
    )
    got = await asyncio.wait_for(waits.with_agent(table([PEER, NEW], after), NEW, progress), 5)
    assert not got.agent
