"""Analysis of a document as it is typed: the text is cut into top-level chunks and each chunk's
parse and findings are kept, so an edit costs the chunk it touched, not the whole file.

A chunk starts at a line that begins at column 0 with code (not a comment, a closing bracket, a
decorated def's own line, or `else`/`elif`/`except`/`finally`). Any chunk that does not parse
alone (a string spanning chunks, say) sends the whole text through `checks.analyze` instead.
"""

from __future__ import annotations

import dataclasses

from raysleuth.lsp.checks import Analysis, Finding, Part, analyze, check_part, parse_part
from raysleuth.lsp.remotes import RemoteDef
from raysleuth.lsp.source import Edit, Span

_CONTINUES = ("else", "elif", "except", "finally", ")", "]", "}", "#")
"""A column-0 line starting with one of these belongs to the chunk before it."""


def split_chunks(text: str) -> list[tuple[int, str]]:
    """(0-based first line, text) of each top-level chunk, in order; together they are `text`."""
    lines = text.splitlines(keepends=True)
    chunks: list[tuple[int, str]] = []
    start = 0
    decorated = False
    for i, line in enumerate(lines):
        first = line[:1]
        if i == 0:
            decorated = line.startswith("@")
            continue
        if not first or first in " \t\r\n" or line.startswith(_CONTINUES):
            continue
        if decorated:  # a decorator's def or class (or the next decorator) joins it
            decorated = line.startswith("@")
            continue
        chunks.append((start, "".join(lines[start:i])))
        start = i
        decorated = line.startswith("@")
    chunks.append((start, "".join(lines[start:])))
    return chunks


class IncrementalAnalyzer:
    """One document's analysis, reusing the parse and the findings of chunks that did not change."""

    def __init__(self) -> None:
        self._parts: dict[str, Part] = {}
        self._checked: dict[tuple, Analysis] = {}

    def analyze(self, text: str, workspace_names: frozenset[str] = frozenset()) -> Analysis | None:
        chunks = split_chunks(text)
        parts: list[tuple[int, str, Part]] = []
        for offset, chunk in chunks:
            part = self._parts.get(chunk) or parse_part(chunk)
            if part is None:
                return analyze(text, workspace_names)  # the chunking misjudged: the slow, sure way
            parts.append((offset, chunk, part))
        aliases = frozenset().union(*(p.aliases for _, _, p in parts))
        names = frozenset().union(*(p.here for _, _, p in parts)) | workspace_names
        large = frozenset().union(*(p.module_large for _, _, p in parts))
        out = Analysis()
        checked: dict[tuple, Analysis] = {}
        for offset, chunk, part in parts:
            key = (chunk, aliases, names, large)
            result = self._checked.get(key) or check_part(part, aliases, names, large)
            checked[key] = result
            out.defs += [_shift_def(d, offset) for d in result.defs] if offset else result.defs
            out.findings += (
                [_shift_finding(f, offset) for f in result.findings] if offset else result.findings
            )
        self._parts = {chunk: part for _, chunk, part in parts}
        self._checked = checked
        return out


def _shift(span: Span, by: int) -> Span:
    return Span(span.line + by, span.col, span.end_line + by, span.end_col)


def _shift_def(d: RemoteDef, by: int) -> RemoteDef:
    return dataclasses.replace(d, span=_shift(d.span, by), name_span=_shift(d.name_span, by))


def _shift_finding(f: Finding, by: int) -> Finding:
    fix = f.fix
    if fix is not None:
        edits = tuple(Edit(_shift(e.span, by), e.text) for e in fix.edits)
        line = fix.breakpoint_line + by if fix.breakpoint_line is not None else None
        fix = dataclasses.replace(fix, edits=edits, breakpoint_line=line)
    return dataclasses.replace(f, span=_shift(f.span, by), fix=fix)
