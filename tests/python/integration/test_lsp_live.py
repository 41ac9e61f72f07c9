"""`raysleuth lsp` against the real broker on the suite's Ray cluster (issue 15): code lenses
with live counts that change when an actor is killed, hovers with ranks and the last crash,
rank checks on breakpoints, and the breakpoint() quick fix setting a cluster breakpoint."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import lsp_actors
import pytest
import pytest_lsp
import ray
from helpers import FIXTURES, wait_until
from lsp_helpers import (
    client_capabilities,
    line_of,
    open_file,
    read_code_actions_as_vscode_does,
    record_lens_refreshes,
    record_notifications,
    server_config,
    wait_for,
)
from lsprotocol import types as T
from pytest_lsp import LanguageClient

ACTORS = FIXTURES / "lsp_actors.py"
EMPTY_STATE = tempfile.mkdtemp(prefix="rs-lsp-live-")
"""No broker.json here: the server must take the broker from initializationOptions."""
atexit.register(shutil.rmtree, EMPTY_STATE, True)  # no folder left in /tmp
ENV = {k: v for k, v in os.environ.items() if k not in ("RAYSLEUTH_BROKER", "RAYSLEUTH_TOKEN")}
ENV["RAYSLEUTH_STATE_DIR"] = EMPTY_STATE
ENV["RAYSLEUTH"] = "0"  # the server is no Ray worker


@pytest_lsp.fixture(config=server_config(ENV))
async def lsp(lsp_client: LanguageClient, broker):
    lsp_client.notes = record_notifications(lsp_client, "raySleuth/brokerStatus", "raySleuth/breakpointAdded")
    lsp_client.lens_refreshes = record_lens_refreshes(lsp_client)
    read_code_actions_as_vscode_does(lsp_client)
    await lsp_client.initialize_session(
        T.InitializeParams(
            capabilities=client_capabilities(),
            initialization_options={"brokerAddress": broker.http, "tokenFile": broker.ready["token_file"]},
        )
    )
    await wait_for(
        lambda: any(n["connected"] for n in lsp_client.notes["raySleuth/brokerStatus"]),
        15,
        "brokerStatus connected",
    )
    yield
    await lsp_client.shutdown_session()


@pytest.fixture(scope="module")
def learners(ray_cluster, client):
    no_hold = {"env_vars": {"RAYSLEUTH_POSTMORTEM_HOLD": "0"}}  # a crash must not wait for an attach
    actors = [lsp_actors.LensLearner.options(runtime_env=no_hold).remote(r, 3) for r in range(3)]
    pids = ray.get([a.pid.remote() for a in actors])
    wait_until(lambda: len(ranked_learners(client)) == 3, timeout=20, message="3 ranked LensLearner workers")
    yield actors, pids
    for a in actors:
        ray.kill(a)


def ranked_learners(client) -> list[dict]:
    return [
        w
        for w in client.workers()
        if w["actor_class"] == "LensLearner" and w["rank"] is not None and w["state"] != "exited"
    ]


async def lens_titles(client: LanguageClient, uri: str, line: int) -> list[str]:
    lenses = await client.text_document_code_lens_async(
        T.CodeLensParams(text_document=T.TextDocumentIdentifier(uri=uri))
    )
    return [lens.command.title for lens in lenses or () if lens.range.start.line == line]


async def hover_text(client: LanguageClient, uri: str, line: int, character: int) -> str:
    hover = await client.text_document_hover_async(
        T.HoverParams(
            text_document=T.TextDocumentIdentifier(uri=uri),
            position=T.Position(line=line, character=character),
        )
    )
    return hover.contents.value if hover else ""


def decorator_line(name: str) -> int:
    lines = ACTORS.read_text().splitlines()
    at = next(i for i, t in enumerate(lines) if t.startswith(("class " + name, "def " + name)))
    return at - 1  # the lens sits on the @ray.remote line


async def test_lens_counts_live_workers_and_drops_one_when_its_actor_is_killed(lsp: LanguageClient, learners):
    actors, _ = learners
    uri = await open_file(lsp, ACTORS)
    line = decorator_line("LensLearner")
    await wait_for(lambda: _has(lens_titles(lsp, uri, line), "3 workers"), 15, "a '3 workers' lens")
    lenses = await lsp.text_document_code_lens_async(
        T.CodeLensParams(text_document=T.TextDocumentIdentifier(uri=uri))
    )
    [reveal] = [x for x in lenses if x.command.title == "3 workers"]
    assert reveal.command.command == "raySleuth.revealWorkers"
    assert (
        reveal.command.arguments[0]["name"] == "LensLearner"
        and len(reveal.command.arguments[0]["workers"]) == 3
    )

    refreshes = len(lsp.lens_refreshes)
    extra = lsp_actors.LensLearner.remote(3, 4)
    ray.get(extra.pid.remote())
    await wait_for(lambda: _has(lens_titles(lsp, uri, line), "4 workers"), 15, "a '4 workers' lens")
    ray.kill(extra)
    await wait_for(
        lambda: _has(lens_titles(lsp, uri, line), "3 workers"), 20, "back to '3 workers' after ray.kill"
    )
    assert len(lsp.lens_refreshes) >= refreshes + 2  # the server asked the editor to redraw each time


async def test_lens_counts_the_workers_running_a_remote_function(lsp: LanguageClient, ray_cluster):
    uri = await open_file(lsp, ACTORS)
    line = decorator_line("lens_wait")
    refs = [lsp_actors.lens_wait.remote(30.0) for _ in range(2)]
    try:
        await wait_for(
            lambda: _has(lens_titles(lsp, uri, line), "2 workers"), 20, "a '2 workers' lens on lens_wait"
        )
    finally:
        for ref in refs:
            ray.cancel(ref, force=True)
    await wait_for(
        lambda: _has(lens_titles(lsp, uri, line), "0 workers"), 20, "'0 workers' once they are cancelled"
    )


async def test_hover_lists_workers_by_rank_and_the_last_crash(lsp: LanguageClient, learners, client):
    actors, pids = learners
    uri = await open_file(lsp, ACTORS)
    name_line = decorator_line("LensLearner") + 1
    text = await wait_for(
        lambda: _contains(hover_text(lsp, uri, name_line, 8), "| 2 |"), 15, "a hover with ranks 0-2"
    )
    rows = [
        r for r in text.splitlines() if r.startswith("| ") and not r.startswith("| rank") and "---" not in r
    ]
    assert [r.split("|")[1].strip() for r in rows] == ["0", "1", "2"]
    assert str(pids[1]) in rows[1]

    with pytest.raises(FloatingPointError):
        ray.get(actors[1].diverge.remote(7))
    text = await wait_for(
        lambda: _contains(hover_text(lsp, uri, name_line, 8), "Last crash"), 20, "the crash in the hover"
    )
    assert "Last crash (rank 1): `FloatingPointError: loss is nan at step 7`" in text
    titles = await lens_titles(lsp, uri, decorator_line("LensLearner"))
    assert "1 crashed" in titles


async def test_a_breakpoint_for_a_rank_the_job_does_not_have_is_flagged(
    lsp: LanguageClient, learners, client
):
    uri = await open_file(lsp, ACTORS)
    line = line_of(ACTORS, "lens-pid")
    lsp.protocol.notify(
        "raySleuth/editorBreakpoints",
        {"uri": uri, "breakpoints": [{"line": line + 1, "condition": "[rank 5] True"}]},
    )
    diags = await wait_for(
        lambda: [d for d in lsp.diagnostics.get(uri, ()) if d.code == "rank-not-in-job"],
        10,
        "a rank-not-in-job diagnostic",
    )
    assert diags[0].range.start.line == line and "[rank 5]" in diags[0].message and "0-2" in diags[0].message

    # A cluster breakpoint from elsewhere (the terminal) for rank 7: flagged too, from the stream.
    client.set_breakpoints(str(ACTORS), [{"line": line + 1, "ranks": [7]}], owner="cli")
    try:
        await wait_for(
            lambda: [d for d in lsp.diagnostics.get(uri, ()) if "[rank 7]" in d.message],
            10,
            "the cluster point's warning",
        )
    finally:
        client.set_breakpoints(str(ACTORS), [], owner="cli")


async def test_breakpoint_quick_fix_sets_a_cluster_breakpoint_through_the_broker(lsp: LanguageClient, client):
    uri = await open_file(lsp, ACTORS)
    line = line_of(ACTORS, "lens-leftover")
    [diag] = [d for d in lsp.diagnostics[uri] if d.code == "leftover-breakpoint"]
    assert diag.range.start.line == line
    [action] = await lsp.text_document_code_action_async(
        T.CodeActionParams(
            text_document=T.TextDocumentIdentifier(uri=uri),
            range=diag.range,
            context=T.CodeActionContext(diagnostics=[diag]),
        )
    )
    try:
        result = await lsp.workspace_execute_command_async(
            T.ExecuteCommandParams(command=action.command.command, arguments=action.command.arguments)
        )
        assert result["cluster"] is True
        mine = [b for b in client.breakpoints() if b["owner"] == "lsp" and b["path"] == str(ACTORS)]
        assert [b["line"] for b in mine] == [action.command.arguments[0]["line"]]
    finally:
        client.set_breakpoints(str(ACTORS), [], owner="lsp")


async def _has(titles_coro, title: str):
    return title in await titles_coro


async def _contains(text_coro, part: str):
    text = await text_coro
    return text if part in text else None
