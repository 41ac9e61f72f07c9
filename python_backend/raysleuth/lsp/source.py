"""One document's text as the analysis sees it: lines, and `ast` positions turned into LSP ones.

`ast` counts columns in UTF-8 bytes from line 1; LSP counts UTF-16 code units from line 0.
Pure functions over text: no I/O, no server.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass


@dataclass(frozen=True)
class Span:
    """A range in LSP terms: 0-based lines, UTF-16 columns, end exclusive."""

    line: int
    col: int
    end_line: int
    end_col: int


@dataclass(frozen=True)
class Edit:
    """Replace `span` with `text` (an empty span inserts, empty text deletes)."""

    span: Span
    text: str


class Source:
    """A document's text with position helpers for `ast` nodes."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = text.splitlines(keepends=True) or [""]

    def line_text(self, lineno: int) -> str:
        """Line `lineno` (1-based, as `ast` counts) without its line break; "" past the end."""
        if 1 <= lineno <= len(self.lines):
            return self.lines[lineno - 1].rstrip("\r\n")
        return ""

    def col16(self, lineno: int, byte_col: int) -> int:
        """A UTF-8 byte column of line `lineno` as a UTF-16 column."""
        line = self.line_text(lineno)
        if line.isascii():
            return byte_col
        prefix = line.encode("utf-8")[:byte_col].decode("utf-8", errors="replace")
        return len(prefix.encode("utf-16-le")) // 2

    def span(self, node: ast.AST, end: ast.AST | None = None) -> Span:
        """The span of `node` (through `end`'s end when given)."""
        (line, col), (end_line, end_col) = start_of(node), end_of(end or node)
        return Span(line - 1, self.col16(line, col), end_line - 1, self.col16(end_line, end_col))

    def segment(self, node: ast.AST) -> str:
        return self.between(*start_of(node), *end_of(node))

    def between(self, lineno: int, col: int, end_lineno: int, end_col: int) -> str:
        """Source text from (lineno, byte col) to (end_lineno, byte end col)."""
        if lineno == end_lineno:
            return self.line_text(lineno).encode()[col:end_col].decode()
        parts = [self.lines[lineno - 1].encode()[col:].decode()]
        parts += self.lines[lineno : end_lineno - 1]
        parts.append(self.line_text(end_lineno).encode()[:end_col].decode())
        return "".join(parts)

    def indent_of(self, lineno: int) -> str:
        line = self.line_text(lineno)
        return line[: len(line) - len(line.lstrip())]

    def whole_lines(self, first: int, last: int) -> Span:
        """Lines `first`..`last` (1-based, inclusive) with their line breaks."""
        if self.lines[last - 1].endswith(("\n", "\r")):
            return Span(first - 1, 0, last, 0)
        return Span(first - 1, 0, last - 1, len(self.line_text(last).encode("utf-16-le")) // 2)


def dotted(node: ast.AST) -> str | None:
    """`ray.util.pdb.set_trace` for that attribute chain; None for anything else."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def start_of(node: ast.AST) -> tuple[int, int]:
    """(line, byte column) where a located node starts (1, 0 for one without a position)."""
    return getattr(node, "lineno", 1), getattr(node, "col_offset", 0)


def end_of(node: ast.AST) -> tuple[int, int]:
    """(line, byte column) where a located node ends (its start when the parser gave no end)."""
    line, col = start_of(node)
    return getattr(node, "end_lineno", None) or line, getattr(node, "end_col_offset", None) or col


def end_line(node: ast.AST) -> int:
    return end_of(node)[0]
