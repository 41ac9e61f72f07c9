"""What the language server's checks produce: a `Finding` (a diagnostic and maybe a `Fix`), and
the `Analysis` of one version of a document."""

from __future__ import annotations

from dataclasses import dataclass, field

from raysleuth.lsp.remotes import RemoteDef
from raysleuth.lsp.source import Edit, Span


@dataclass(frozen=True)
class Fix:
    """A quick fix: text edits, and maybe a cluster breakpoint to set at `breakpoint_line`."""

    title: str
    edits: tuple[Edit, ...]
    breakpoint_line: int | None = None
    #: 1-based line, after the edits, where a cluster breakpoint replaces the removed call.


@dataclass(frozen=True)
class Finding:
    code: str
    message: str
    span: Span
    severity: str = "warning"
    #: "warning" or "information".
    fix: Fix | None = None


@dataclass
class Analysis:
    """What one version of a document holds: its remote definitions and its findings."""

    defs: list[RemoteDef] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
