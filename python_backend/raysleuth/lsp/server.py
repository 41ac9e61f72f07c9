"""The pygls server behind `raysleuth lsp`: wires LSP requests to the static checks and to the
live cluster. Its log goes to stderr (the client's output channel); stdout carries only the
protocol, so anything else that prints is sent to stderr too.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from lsprotocol import types as T
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from raysleuth.lsp.findings import Analysis, Finding
from raysleuth.lsp.incremental import IncrementalAnalyzer
from raysleuth.lsp.live import BrokerOptions, LiveCluster
from raysleuth.lsp.points import breakpoint_findings
from raysleuth.lsp.remotes import RemoteDef, scan_workspace
from raysleuth.lsp.render import hover_markdown, lens_parts
from raysleuth.lsp.source import Edit, Source, Span

log = logging.getLogger(__name__)

NAME = "raysleuth-lsp"
SET_BREAKPOINT = "raySleuth.lsp.setClusterBreakpoint"
"""Server command (a quick fix's): set a cluster breakpoint; argument {uri, line} (1-based)."""
STATUS = "raySleuth/brokerStatus"
"""Server → client notification {connected, url, message}: sent once per change."""
BREAKPOINT_ADDED = "raySleuth/breakpointAdded"
"""Server → client notification {uri, path, line, cluster}: `cluster` false means no broker
took it, so the client should add an editor breakpoint (its mirror sets it later)."""
EDITOR_BREAKPOINTS = "raySleuth/editorBreakpoints"
"""Client → server notification {uri, breakpoints: [{line (1-based), condition}]}."""
SEVERITY = {"warning": T.DiagnosticSeverity.Warning, "information": T.DiagnosticSeverity.Information}


@dataclass
class Document:
    """What the server keeps per open document."""

    analysis: Analysis = field(default_factory=Analysis)
    #: The last version that parsed (a half-typed line keeps the previous findings' lenses).
    source: Source = field(default_factory=lambda: Source(""))
    editor_breakpoints: list[dict] = field(default_factory=list)
    published: list[Finding] = field(default_factory=list)
    analyzer: IncrementalAnalyzer = field(default_factory=IncrementalAnalyzer)
    #: Keeps each top-level chunk's parse and findings: an edit re-checks only its chunk.


class SleuthLanguageService:
    """Documents, the workspace's remote names and the live cluster, answering the LSP features."""

    def __init__(self, server: LanguageServer, options: BrokerOptions) -> None:
        self.server = server
        self.docs: dict[str, Document] = {}
        self.workspace_names: frozenset[str] = frozenset()
        self.live = LiveCluster(options, self.on_live_change, self.on_status)
        self._lens_key: object = None

    # --- documents ----------------------------------------------------------------------------

    def update(self, uri: str, text: str) -> None:
        doc = self.docs.setdefault(uri, Document())
        analysis = doc.analyzer.analyze(text, self.workspace_names)
        if analysis is not None:
            doc.analysis, doc.source = analysis, Source(text)
        self.publish(uri)

    def publish(self, uri: str) -> None:
        doc = self.docs.get(uri)
        if doc is None:
            return
        findings = list(doc.analysis.findings)
        if doc.editor_breakpoints or self.live.breakpoints:
            live = self.live.workers if self.live.connected else None
            findings += breakpoint_findings(
                doc.source, to_fs_path(uri) or uri, doc.editor_breakpoints, self.live.breakpoints, live
            )
        doc.published = findings
        diags = [
            T.Diagnostic(
                range=_range(f.span),
                message=f.message,
                severity=SEVERITY.get(f.severity, T.DiagnosticSeverity.Warning),
                code=f.code,
                source="raysleuth",
            )
            for f in findings
        ]
        self.server.text_document_publish_diagnostics(T.PublishDiagnosticsParams(uri=uri, diagnostics=diags))

    def close(self, uri: str) -> None:
        self.docs.pop(uri, None)
        self.server.text_document_publish_diagnostics(T.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    # --- features -----------------------------------------------------------------------------

    def code_lenses(self, uri: str) -> list[T.CodeLens]:
        doc = self.docs.get(uri)
        if doc is None or not self.live.connected:
            return []  # lenses are live counts only; the status bar says no broker is there
        out = []
        for d in doc.analysis.defs:
            for part in lens_parts(d, self.live.workers, self.live.crashes):
                cmd = T.Command(title=part.title, command=part.command, arguments=part.arguments)
                out.append(T.CodeLens(range=_range(d.span), command=cmd))
        return out

    def hover(self, uri: str, pos: T.Position) -> T.Hover | None:
        doc = self.docs.get(uri)
        if doc is None:
            return None
        defn, span = self._remote_at(doc, pos)
        if defn is None or span is None:
            return None
        workers = self.live.workers if self.live.connected else None
        text = hover_markdown(defn, workers, self.live.crashes if self.live.connected else [])
        return T.Hover(contents=T.MarkupContent(kind=T.MarkupKind.Markdown, value=text), range=_range(span))

    def _remote_at(self, doc: Document, pos: T.Position) -> tuple[RemoteDef | None, Span | None]:
        for d in doc.analysis.defs:
            s = d.name_span
            if s.line == pos.line and s.col <= pos.character <= s.end_col:
                return d, s
        line = doc.source.line_text(pos.line + 1)
        start = end = min(pos.character, len(line))
        while start > 0 and (line[start - 1].isalnum() or line[start - 1] == "_"):
            start -= 1
        while end < len(line) and (line[end].isalnum() or line[end] == "_"):
            end += 1
        word = line[start:end]
        found = next((d for d in doc.analysis.defs if d.name == word), None)
        return (found, Span(pos.line, start, pos.line, end)) if found else (None, None)

    def code_actions(self, uri: str, rng: T.Range, diagnostics: list[T.Diagnostic]) -> list[T.CodeAction]:
        doc = self.docs.get(uri)
        if doc is None:
            return []
        out = []
        for f in doc.published:
            if f.fix is None or not _overlaps(f.span, rng):
                continue
            diag = next((d for d in diagnostics if d.code == f.code and d.range == _range(f.span)), None)
            edit = T.WorkspaceEdit(changes={uri: [_text_edit(e) for e in f.fix.edits]})
            command = None
            if f.fix.breakpoint_line is not None:
                args = [{"uri": uri, "line": f.fix.breakpoint_line}]
                command = T.Command(title=f.fix.title, command=SET_BREAKPOINT, arguments=args)
            out.append(
                T.CodeAction(
                    title=f.fix.title,
                    kind=T.CodeActionKind.QuickFix,
                    diagnostics=[diag] if diag else None,
                    edit=edit,
                    command=command,
                    is_preferred=True,
                )
            )
        return out

    async def set_breakpoint(self, args: dict) -> dict:
        uri, line = args["uri"], int(args["line"])
        path = to_fs_path(uri) or uri
        cluster, message = False, "no broker connected: set as an editor breakpoint"
        if self.live.connected:
            try:
                await self.live.set_breakpoint(path, line)
                cluster, message = True, f"cluster breakpoint set at {Path(path).name}:{line}"
            except Exception as exc:  # noqa: BLE001 - the edit is applied already: say why, go on
                log.exception("setting a cluster breakpoint at %s:%d failed", path, line)
                message = f"the broker refused the breakpoint ({exc}): set as an editor breakpoint"
        result = {"uri": uri, "path": path, "line": line, "cluster": cluster, "message": message}
        self.server.protocol.notify(BREAKPOINT_ADDED, result)
        return result

    def set_editor_breakpoints(self, params: dict) -> None:
        uri, bps = params.get("uri"), params.get("breakpoints")
        if uri in self.docs and isinstance(bps, list):
            self.docs[uri].editor_breakpoints = [b for b in bps if isinstance(b, dict)]
            self.publish(uri)

    # --- workspace and the live cluster -------------------------------------------------------

    async def scan(self, roots: list[Path]) -> None:
        names = await asyncio.to_thread(scan_workspace, roots)
        log.info("workspace scan: %d names handed to ray.remote", len(names))
        if names != self.workspace_names:
            self.workspace_names = frozenset(names)
            for uri in list(self.docs):
                doc = self.server.workspace.get_text_document(uri)
                self.update(uri, doc.source)
            self.refresh_lenses()

    def on_live_change(self, kind: str) -> None:
        if kind in ("workers", "crashes"):
            key = self._lens_state()
            if key != self._lens_key:
                self._lens_key = key
                self.refresh_lenses()
        if kind in ("workers", "breakpoints"):
            for uri, doc in list(self.docs.items()):
                if kind == "breakpoints" or doc.editor_breakpoints or self.live.breakpoints:
                    self.publish(uri)  # rank checks read the live ranks; nothing else does

    def _lens_state(self) -> object:
        """What lens titles depend on: a refresh only when this changes (not per heartbeat)."""
        workers = tuple(sorted((w.id, w.state, w.actor_class or "", w.task or "") for w in self.live.workers))
        return self.live.connected, workers, tuple(c.get("id") for c in self.live.crashes[:50])

    def on_status(self, connected: bool, message: str) -> None:
        self.server.protocol.notify(
            STATUS, {"connected": connected, "url": self.live.url, "message": message}
        )
        self.refresh_lenses()

    def refresh_lenses(self) -> None:
        caps = self.server.client_capabilities.workspace
        if caps and caps.code_lens and caps.code_lens.refresh_support:
            self.server.workspace_code_lens_refresh(None)


def build_server(options: BrokerOptions) -> tuple[LanguageServer, SleuthLanguageService]:
    from raysleuth import __version__

    server = LanguageServer(NAME, __version__)
    svc = SleuthLanguageService(server, options)
    tasks: set[asyncio.Task] = set()

    def spawn(coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    @server.feature(T.INITIALIZE)
    def initialize(ls: LanguageServer, params: T.InitializeParams) -> None:
        opts = params.initialization_options
        if isinstance(opts, dict) and any(opts.get(k) for k in ("brokerAddress", "stateDir", "tokenFile")):
            svc.live.options = BrokerOptions(
                opts.get("brokerAddress") or options.broker,
                opts.get("stateDir") or options.state_dir,
                opts.get("tokenFile") or options.token_file,
            )

    @server.feature(T.INITIALIZED)
    def initialized(ls: LanguageServer, params: T.InitializedParams) -> None:
        roots = [Path(p) for f in ls.workspace.folders.values() if (p := to_fs_path(f.uri))]
        if roots:
            spawn(svc.scan(roots))
        spawn(svc.live.run())

    @server.feature(T.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: LanguageServer, params: T.DidOpenTextDocumentParams) -> None:
        svc.update(params.text_document.uri, params.text_document.text)

    @server.feature(T.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: LanguageServer, params: T.DidChangeTextDocumentParams) -> None:
        uri = params.text_document.uri
        svc.update(uri, ls.workspace.get_text_document(uri).source)

    @server.feature(T.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: LanguageServer, params: T.DidCloseTextDocumentParams) -> None:
        svc.close(params.text_document.uri)

    @server.feature(T.TEXT_DOCUMENT_CODE_LENS)
    def code_lens(ls: LanguageServer, params: T.CodeLensParams) -> list[T.CodeLens]:
        return svc.code_lenses(params.text_document.uri)

    @server.feature(T.TEXT_DOCUMENT_HOVER)
    def hover(ls: LanguageServer, params: T.HoverParams) -> T.Hover | None:
        return svc.hover(params.text_document.uri, params.position)

    @server.feature(
        T.TEXT_DOCUMENT_CODE_ACTION, T.CodeActionOptions(code_action_kinds=[T.CodeActionKind.QuickFix])
    )
    def code_action(ls: LanguageServer, params: T.CodeActionParams) -> list[T.CodeAction]:
        return svc.code_actions(params.text_document.uri, params.range, list(params.context.diagnostics))

    @server.command(SET_BREAKPOINT)
    async def set_breakpoint(ls: LanguageServer, *args) -> dict:
        return await svc.set_breakpoint(args[0] if args else {})

    @server.feature(EDITOR_BREAKPOINTS)
    def editor_breakpoints(ls: LanguageServer, params) -> None:
        svc.set_editor_breakpoints(plain(params))

    return server, svc


def run_server(broker: str | None = None, state_dir: str | None = None, token_file: str | None = None) -> int:
    """Serve LSP on stdin/stdout until the client exits."""
    proto_out = os.fdopen(os.dup(sys.stdout.fileno()), "wb", buffering=0)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # a stray print must not corrupt the protocol
    sys.stdout = sys.stderr
    logging.basicConfig(
        level=os.environ.get("RAYSLEUTH_LSP_LOG", "INFO").upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("pygls").setLevel(os.environ.get("RAYSLEUTH_LSP_PYGLS_LOG", "WARNING").upper())
    server, _ = build_server(BrokerOptions(broker, state_dir, token_file))
    server.start_io(sys.stdin.buffer, proto_out)
    return 0


def plain(obj):
    """pygls hands a custom notification's params over as namedtuples: back to JSON values."""
    if hasattr(obj, "_asdict"):
        return {k: plain(v) for k, v in obj._asdict().items()}
    if isinstance(obj, list | tuple):
        return [plain(v) for v in obj]
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    return obj


def _range(s: Span) -> T.Range:
    return T.Range(
        start=T.Position(line=s.line, character=s.col), end=T.Position(line=s.end_line, character=s.end_col)
    )


def _text_edit(e: Edit) -> T.TextEdit:
    return T.TextEdit(range=_range(e.span), new_text=e.text)


def _overlaps(s: Span, r: T.Range) -> bool:
    return (s.line, s.col) <= (r.end.line, r.end.character) and (r.start.line, r.start.character) <= (
        s.end_line,
        s.end_col,
    )
