"""Library frames out of the way on a real cluster (issue #38): workers whose methods run under a
dispatch wrapper installed as a package (`site-packages/fakefw`, shaped like verl 0.9.1's
`@register` and its `inner`). The stack tree parts the ranks at the user's frame that called the
wrapper, not at the wrapper; `raysleuth stacks` folds the library frames; a crash raised from
inside the framework, held and attached to, stops on the user's line with the wrapper's and
Ray's frames dimmed and no made-up source path."""

from __future__ import annotations

import asyncio
from pathlib import Path

import lib_job
import pytest
import ray
from helpers import FIXTURES, dap_address, marker_line, wait_until
from test_postmortem import Watcher

from raysleuth.dap.client import open_session

JOB = str(FIXTURES / "lib_job.py")
FAKEFW = str(FIXTURES / "site-packages" / "fakefw" / "__init__.py")


def line(marker: str) -> int:
    return marker_line(JOB, marker)


def same(a, b) -> bool:
    return bool(a) and bool(b) and Path(a).resolve() == Path(b).resolve()


def nodes(tree: dict):
    yield tree
    for c in tree["children"]:
        yield from nodes(c)


@pytest.fixture
def watcher(broker, client):
    w = Watcher(broker)
    wait_until(lambda: client.get("/v1/status")["watchers"] >= 1, 10, message="the stream watched")
    yield w
    w.close()
    wait_until(lambda: client.get("/v1/status")["watchers"] == 0, 10, message="the stream left")


def worker_id(client, pid: int) -> str:
    w = wait_until(
        lambda: next((w for w in client.workers() if w["pid"] == pid and w["agent"]), None),
        60,
        message=f"worker pid {pid} in the table with its agent",
    )
    return w["id"]


def test_the_tree_parts_ranks_at_the_users_frame_not_the_wrapper(ray_cluster, client, tmp_path):
    release = tmp_path / "release"
    cls = ray.remote(num_cpus=0)(lib_job.RoleWorker)
    actors = [cls.remote(r) for r in range(3)]
    try:
        ids = [worker_id(client, pid) for pid in ray.get([a.pid.remote() for a in actors], timeout=120)]
        refs = [a.init_model.remote(str(release)) for a in actors]
        query = f"/v1/stacks?tree=1&workers={','.join(ids)}"

        def parted():
            res = client.get(query)
            trees = res.get("tree") or []
            return res if len(trees) == 1 and any(n["branch"] for n in nodes(trees[0])) else None

        res = wait_until(parted, 60, interval=0.2, message="the three ranks in load(), rank 1 apart")
        tree = res["tree"][0]
        forks = [n for n in nodes(tree) if n["branch"]]
        assert [(n["function"], n["line"], n["library"]) for n in forks] == [
            ("init_model", line("lib-call"), False)
        ]
        assert same(forks[0]["path"], JOB)
        assert [c["line"] for c in forks[0]["children"]] == [line("lib-others"), line("lib-rank-1")]
        via = forks[0]["children"][0]["via"]
        # The wrapper (and Ray's tracing wrapper it puts around every actor method) is the way in.
        assert (via[-1]["function"], same(via[-1]["path"], FAKEFW)) == ("inner", True), via
        assert all(f["path"] and "site-packages" in f["path"] for f in via), via
        assert all(not n["library"] for n in nodes(tree) if n["children"]), "never a fork on a library node"
        frames = [f for w in res["workers"] for t in w["threads"] for f in t["frames"]]
        assert all(isinstance(f.get("library"), bool) for f in frames)
        assert {f["library"] for f in frames if same(f["path"], FAKEFW)} == {True}
        assert {f["library"] for f in frames if same(f["path"], JOB)} == {False}
        text = client.get(f"/v1/stacks?workers={','.join(ids)}")["text"]
        full = client.get(f"/v1/stacks?all_frames=1&workers={','.join(ids)}")["text"]
        assert "library frames:" in text and "library frames:" not in full, text
        assert "fakefw" in full and full.count("\n") > text.count("\n")
    finally:
        release.write_text("go")
        ray.get(refs, timeout=60)
        for a in actors:
            ray.kill(a)


async def test_a_crash_inside_the_framework_stops_on_the_users_line(broker, client, watcher):
    cls = ray.remote(num_cpus=0, max_restarts=0)(lib_job.RoleWorker)
    a = cls.options(runtime_env={"env_vars": {"RAYSLEUTH_POSTMORTEM_HOLD": "60"}}).remote(7)
    pid = await asyncio.wait_for(a.pid.remote(), 60)
    ref = a.update.remote(-1.0)
    held = await asyncio.to_thread(
        wait_until,
        lambda: next((w for w in client.workers() if w["pid"] == pid and w["state"] == "crashed"), None),
        30,
        0.1,
        "the worker held as crashed",
    )
    assert held["paused_at"]["line"] == line("lib-raise") and same(held["paused_at"]["path"], JOB), held
    record = client.get(f"/v1/crashes/{held['crash']}")
    assert [f["library"] for f in record["frames"][:2]] == [True, False], record["frames"][:2]
    host, port = dap_address(broker)
    s = await open_session(host, port, {"token": broker.token, "crash": held["crash"]})
    try:
        stopped = await s.wait_event("stopped", timeout=30)
        tid = stopped["body"]["threadId"]
        frames = (await s.request("stackTrace", {"threadId": tid}))["body"]["stackFrames"]
        top = frames[0]
        assert top["line"] == line("lib-raise") and same(top["source"]["path"], JOB), frames[:3]
        assert "presentationHint" not in top
        wrappers = [f for f in frames if same((f.get("source") or {}).get("path"), FAKEFW)]
        assert wrappers and all(f["presentationHint"] == "subtle" for f in wrappers), wrappers
        assert all(f["source"]["presentationHint"] == "deemphasize" for f in wrappers)
        for f in frames:  # Cython's frames: named, dimmed, no path made up under the worker's folder
            src = f.get("source") or {}
            assert not str(src.get("path") or "").endswith(".pyx"), f
            if str(src.get("name") or "").endswith(".pyx"):
                assert f["presentationHint"] == "subtle" and not src.get("sourceReference"), f
        w = await asyncio.to_thread(
            wait_until,
            lambda: next((w for w in client.workers() if w["pid"] == pid and w.get("paused_at")), None),
            10,
        )
        assert w["paused_at"]["line"] == line("lib-raise") and same(w["paused_at"]["path"], JOB), w
        await s.request("continue", {"threadId": tid})
        with pytest.raises(ray.exceptions.RayTaskError) as err:
            await asyncio.wait_for(ref, 30)
        assert isinstance(err.value.cause, ValueError)
    finally:
        await s.request("disconnect", {}, check=False)
        await s.close()
    ray.kill(a)
