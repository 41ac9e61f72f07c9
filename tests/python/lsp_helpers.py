"""Shared by the language-server tests: start the real `raysleuth lsp` under pytest-lsp, open
fixture files, wait for diagnostics, apply a quick fix's edits to text."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Union

from helpers import FIXTURES
from lsprotocol import types as T
from pytest_lsp import ClientServerConfig, LanguageClient

from raysleuth.lsp.server import plain

LSP_FIXTURES = FIXTURES / "lsp"


def server_config(env: dict) -> ClientServerConfig:
    """The real server, as the extension starts it (`--stdio` is what vscode-languageclient adds)."""
    return ClientServerConfig(
        server_command=[sys.executable, "-m", "raysleuth", "lsp", "--stdio"], server_env=env
    )


def client_capabilities() -> T.ClientCapabilities:
    return T.ClientCapabilities(
        workspace=T.WorkspaceClientCapabilities(
            code_lens=T.CodeLensWorkspaceClientCapabilities(refresh_support=True)
        ),
        text_document=T.TextDocumentClientCapabilities(
            publish_diagnostics=T.PublishDiagnosticsClientCapabilities(),
            hover=T.HoverClientCapabilities(content_format=[T.MarkupKind.Markdown]),
        ),
    )


def read_code_actions_as_vscode_does(client: LanguageClient) -> None:
    """lsprotocol reads any code action that has a `command` as a bare Command (dropping its
    edit); VS Code tells them apart by `command` being a string. Read them the same way here."""
    conv = client.protocol._converter
    union = Union[T.Command, T.CodeAction]  # noqa: UP007 - the exact type lsprotocol's hook is for

    def hook(obj, _type):
        return conv.structure(obj, T.Command if isinstance(obj.get("command"), str) else T.CodeAction)

    conv.register_structure_hook_func(lambda t: t == union, hook)


def record_notifications(client: LanguageClient, *methods: str) -> dict[str, list]:
    """Every params object the server sends for `methods`, in order (registered before initialize,
    so nothing sent early is missed)."""
    seen: dict[str, list] = {m: [] for m in methods}
    for m in methods:
        client.feature(m)(lambda ls, params, m=m: seen[m].append(plain(params)))
    return seen


def record_lens_refreshes(client: LanguageClient) -> list[int]:
    count: list[int] = []
    client.feature(T.WORKSPACE_CODE_LENS_REFRESH)(lambda ls, params: count.append(1))
    return count


async def open_file(client: LanguageClient, path: Path, text: str | None = None) -> str:
    uri = path.as_uri()
    client.text_document_did_open(
        T.DidOpenTextDocumentParams(
            text_document=T.TextDocumentItem(
                uri=uri, language_id="python", version=1, text=text or path.read_text()
            )
        )
    )
    await wait_for_diagnostics(client, uri)
    return uri


async def wait_for_diagnostics(client: LanguageClient, uri: str, timeout: float = 10.0) -> list[T.Diagnostic]:
    """The next publishDiagnostics for `uri` after this call."""

    async def next_for_uri():
        while True:
            params = await client.wait_for_notification(T.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
            if params.uri == uri:
                return params.diagnostics

    return await asyncio.wait_for(next_for_uri(), timeout)


async def wait_for(condition, timeout: float, message: str, interval: float = 0.05):
    """The async twin of helpers.wait_until: poll `condition()` without blocking the client's loop."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last = None
    while True:
        last = condition()
        if asyncio.iscoroutine(last):
            last = await last
        if last:
            return last
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {message}; last: {last!r}")
        await asyncio.sleep(interval)


def apply_edits(text: str, edits: list[T.TextEdit]) -> str:
    """`text` after `edits` (LSP positions; ASCII fixtures, so columns are characters)."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(p: T.Position) -> int:
        return starts[min(p.line, len(lines))] + p.character

    for e in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        text = text[: offset(e.range.start)] + e.new_text + text[offset(e.range.end) :]
    return text


def line_of(path: Path, marker: str) -> int:
    """0-based line of `# @bp <marker>` in a fixture (helpers.marker_line is 1-based)."""
    from helpers import marker_line

    return marker_line(path, marker) - 1
