"""`raysleuth lsp` with no broker, end to end: the real server under pytest-lsp, fixture files
from tests/fixtures/lsp/, every diagnostic and every quick fix's edit (issue 15)."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import pytest_lsp
from lsp_helpers import (
    LSP_FIXTURES,
    apply_edits,
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

EMPTY_STATE = tempfile.mkdtemp(prefix="rs-lsp-nobroker-")
"""A state dir with no broker.json: the server finds no broker."""
atexit.register(shutil.rmtree, EMPTY_STATE, True)  # no folder left in /tmp
ENV = {k: v for k, v in os.environ.items() if k not in ("RAYSLEUTH_BROKER", "RAYSLEUTH_TOKEN")}
ENV["RAYSLEUTH_STATE_DIR"] = EMPTY_STATE
NOTES = ("raySleuth/brokerStatus", "raySleuth/breakpointAdded")


@pytest_lsp.fixture(config=server_config(ENV))
async def client(lsp_client: LanguageClient):
    lsp_client.notes = record_notifications(lsp_client, *NOTES)
    lsp_client.lens_refreshes = record_lens_refreshes(lsp_client)
    read_code_actions_as_vscode_does(lsp_client)
    await lsp_client.initialize_session(
        T.InitializeParams(
            capabilities=client_capabilities(),
            workspace_folders=[T.WorkspaceFolder(uri=LSP_FIXTURES.as_uri(), name="lsp")],
        )
    )
    yield
    await lsp_client.shutdown_session()


def by_line(diags: list[T.Diagnostic]) -> dict[int, set[str]]:
    out: dict[int, set[str]] = {}
    for d in diags:
        out.setdefault(d.range.start.line, set()).add(str(d.code))
    return out


async def actions_at(client: LanguageClient, uri: str, diag: T.Diagnostic) -> list[T.CodeAction]:
    return await client.text_document_code_action_async(
        T.CodeActionParams(
            text_document=T.TextDocumentIdentifier(uri=uri),
            range=diag.range,
            context=T.CodeActionContext(diagnostics=[diag]),
        )
    )


def diag_at(diags: list[T.Diagnostic], line: int, code: str) -> T.Diagnostic:
    [d] = [d for d in diags if d.range.start.line == line and d.code == code]
    return d


async def test_leftover_debugger_calls_in_remote_code_are_flagged_and_only_there(client: LanguageClient):
    path = LSP_FIXTURES / "leftover.py"
    uri = await open_file(client, path)
    lines = by_line(client.diagnostics[uri])
    for marker in ("leftover-builtin", "leftover-pdb", "leftover-debugpy", "leftover-ray-pdb"):
        assert lines.get(line_of(path, marker)) == {"leftover-breakpoint"}, marker
    driver_line = next(i for i, t in enumerate(path.read_text().splitlines()) if "not remote code" in t)
    assert driver_line not in lines
    assert len(client.diagnostics[uri]) == 4


async def test_a_class_handed_to_ray_remote_in_another_file_is_remote_code(client: LanguageClient):
    path = LSP_FIXTURES / "workers.py"
    # The workspace scan (group.py hands RolloutWorker to ray.remote) may finish after the open:
    # the server then re-publishes.
    uri = await open_file(client, path)
    want = line_of(path, "leftover-in-workspace-actor")
    await wait_for(
        lambda: want in by_line(client.diagnostics.get(uri, [])), 10, "the workspace scan's diagnostic"
    )
    assert set(by_line(client.diagnostics[uri])) == {want}  # PlainHelper is not remote code
    hover = await client.text_document_hover_async(
        T.HoverParams(
            text_document=T.TextDocumentIdentifier(uri=uri), position=T.Position(line=3, character=8)
        )
    )
    assert "actor class `RolloutWorker`" in hover.contents.value
    assert "No Ray Sleuth broker connected" in hover.contents.value


async def test_breakpoint_quick_fix_removes_the_line_and_sets_a_breakpoint_there(client: LanguageClient):
    path = LSP_FIXTURES / "leftover.py"
    text = path.read_text()
    uri = await open_file(client, path)
    line = line_of(path, "leftover-builtin")
    [action] = await actions_at(client, uri, diag_at(client.diagnostics[uri], line, "leftover-breakpoint"))
    assert action.kind == T.CodeActionKind.QuickFix
    fixed = apply_edits(text, action.edit.changes[uri])
    assert fixed.splitlines()[line] == "    return total / len(shard)"  # the next statement moved up
    assert "breakpoint()  # @bp leftover-builtin" not in fixed
    assert action.command.command == "raySleuth.lsp.setClusterBreakpoint"
    assert list(action.command.arguments) == [{"uri": uri, "line": line + 1}]

    # No broker: the server says so and hands the breakpoint to the editor.
    result = await client.workspace_execute_command_async(
        T.ExecuteCommandParams(command=action.command.command, arguments=action.command.arguments)
    )
    assert result["cluster"] is False and result["line"] == line + 1
    added = await wait_for(lambda: client.notes["raySleuth/breakpointAdded"], 5, "breakpointAdded")
    assert added[0]["uri"] == uri and added[0]["cluster"] is False


async def test_breakpoint_quick_fix_on_import_pdb_line_and_at_the_end_of_a_block(client: LanguageClient):
    path = LSP_FIXTURES / "leftover.py"
    text = path.read_text()
    uri = await open_file(client, path)
    diags = client.diagnostics[uri]
    pdb_line = line_of(path, "leftover-pdb")
    [pdb_fix] = await actions_at(client, uri, diag_at(diags, pdb_line, "leftover-breakpoint"))
    fixed = apply_edits(text, pdb_fix.edit.changes[uri]).splitlines()
    assert fixed[pdb_line] == "        return len(batch)"  # `import pdb; pdb.set_trace()` went as one
    last_line = line_of(path, "leftover-debugpy")
    [last_fix] = await actions_at(client, uri, diag_at(diags, last_line, "leftover-breakpoint"))
    fixed = apply_edits(text, last_fix.edit.changes[uri]).splitlines()
    assert fixed[last_line] == "        pass"  # the method's only statement: the block stays valid
    assert last_fix.command.arguments[0]["line"] == last_line + 1


async def test_each_ray_anti_pattern_is_flagged_on_its_line(client: LanguageClient):
    path = LSP_FIXTURES / "antipatterns.py"
    uri = await open_file(client, path)
    lines = by_line(client.diagnostics[uri])
    assert lines == {
        line_of(path, "get-siblings"): {"ray-get-own-tasks"},
        line_of(path, "get-in-loop"): {"ray-get-in-loop"},
        line_of(path, "get-in-loop-by-name"): {"ray-get-in-loop"},
        line_of(path, "get-in-comprehension"): {"ray-get-in-loop"},
        line_of(path, "large-by-value"): {"large-arg-by-value"},
        line_of(path, "unused-result"): {"remote-result-unused"},
    }
    for d in client.diagnostics[uri]:
        assert d.source == "raysleuth" and "\n" not in d.message and "http" not in d.message


async def test_anti_pattern_fixes_rewrite_the_code(client: LanguageClient):
    path = LSP_FIXTURES / "antipatterns.py"
    text = path.read_text()
    uri = await open_file(client, path)
    diags = client.diagnostics[uri]

    comp = line_of(path, "get-in-comprehension")
    [fix] = await actions_at(client, uri, diag_at(diags, comp, "ray-get-in-loop"))
    fixed = apply_edits(text, fix.edit.changes[uri]).splitlines()
    assert fixed[comp].startswith("    return ray.get([square.remote(i) for i in range(n)])")

    big = line_of(path, "large-by-value")
    [fix] = await actions_at(client, uri, diag_at(diags, big, "large-arg-by-value"))
    fixed = apply_edits(text, fix.edit.changes[uri]).splitlines()
    loop = big - 1
    assert fixed[loop] == "    weights_ref = ray.put(weights)"
    assert fixed[loop + 1] == "    for item in items:"
    assert fixed[big + 1].strip().startswith("refs.append(score.remote(weights_ref, item))")

    # No safe rewrite for these: the diagnostic alone.
    for marker, code in (("get-in-loop", "ray-get-in-loop"), ("unused-result", "remote-result-unused")):
        assert not await actions_at(client, uri, diag_at(diags, line_of(path, marker), code))


async def test_an_edit_updates_the_diagnostics(client: LanguageClient):
    path = LSP_FIXTURES / "leftover.py"
    uri = await open_file(client, path)
    line = line_of(path, "leftover-builtin")
    client.text_document_did_change(
        T.DidChangeTextDocumentParams(
            text_document=T.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[
                T.TextDocumentContentChangePartial(
                    range=T.Range(
                        start=T.Position(line=line, character=0), end=T.Position(line=line + 1, character=0)
                    ),
                    text="",
                )
            ],
        )
    )
    # The latest publish, not the next one: the workspace scan may re-publish the old set first.
    three = lambda: (d := client.diagnostics.get(uri)) is not None and len(d) == 3 and d  # noqa: E731
    diags = await wait_for(three, 10, "the edit's diagnostics")
    assert line not in by_line(diags)


async def test_a_rank_scope_that_does_not_parse_marks_its_line(client: LanguageClient):
    path = LSP_FIXTURES / "scopes.py"
    uri = await open_file(client, path)
    assert not client.diagnostics[uri]
    scoped, unscoped = line_of(path, "scoped"), line_of(path, "unscoped")
    client.protocol.notify(
        "raySleuth/editorBreakpoints",
        {
            "uri": uri,
            "breakpoints": [
                {"line": scoped + 1, "condition": "[rank 3-1] x > 0"},
                {"line": unscoped + 1, "condition": "[rank 0] x > 0"},
            ],
        },
    )
    diags = await wait_for(lambda: client.diagnostics.get(uri), 10, "the scope diagnostic")
    [d] = diags
    assert d.range.start.line == scoped and d.code == "rank-scope-invalid"
    assert "does not parse" in d.message and "3-1" in d.message


async def test_without_a_broker_there_are_no_lenses_and_the_status_is_said_once(client: LanguageClient):
    path = LSP_FIXTURES / "leftover.py"
    uri = await open_file(client, path)
    lenses = await client.text_document_code_lens_async(
        T.CodeLensParams(text_document=T.TextDocumentIdentifier(uri=uri))
    )
    assert not lenses
    status = await wait_for(lambda: client.notes["raySleuth/brokerStatus"], 10, "a brokerStatus notification")
    assert status[0]["connected"] is False and "raysleuth broker" in status[0]["message"]
    # It keeps retrying (several attempts within 2 s) but says so only once.
    await open_file(client, LSP_FIXTURES / "scopes.py")
    assert len(client.notes["raySleuth/brokerStatus"]) == 1


def test_the_server_writes_nothing_but_protocol_to_stdout_and_exits_0_on_eof():
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "raysleuth", "lsp", "--stdio"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        env=ENV,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout == b""
