"""Text from the cluster made safe to show on a terminal (#37): actor and task names, messages,
paths, log lines and values come from code that anyone with a job on the cluster writes, so none
of their characters may drive the terminal. Never drop a character: show it, escaped.

A character is shown as an escape (`\\x1b`, `\\n`, `\\u202e`, `\\U000e0041`) when it is a control
character (C0, DEL, C1), a format character (Unicode Cf: bidi embeddings, overrides and
isolates U+202A-202E/U+2066-2069, zero-width characters, tags), a line or paragraph separator
(U+2028/9) or a lone surrogate (an undecodable byte, which would also make `print` raise).
`one_line` escapes newline and tab too (a table cell, a name, a log line: a newline there could
forge a row); `lines` keeps them (a stack, a multi-line value).
"""

from __future__ import annotations

import unicodedata

UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
"""Unicode general categories never written raw: controls, format characters (bidi overrides,
zero-width ones), surrogates, line and paragraph separators."""

NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(ch: str) -> str:
    if ch in NAMED:
        return NAMED[ch]
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _unsafe(ch: str) -> bool:
    # The printable ASCII fast path first: nearly every character of every line.
    return not (" " <= ch <= "~") and unicodedata.category(ch) in UNSAFE_CATEGORIES


def visible(value: object, keep: str = "") -> str:
    """`value` as text with every unsafe character escaped but those in `keep` ("\\n\\t")."""
    text = value if isinstance(value, str) else str(value)
    if text.isascii() and text.isprintable():
        return text  # the common case: nothing to escape (isprintable is False for \n and \t)
    return "".join(_escape(ch) if ch not in keep and _unsafe(ch) else ch for ch in text)


def one_line(value: object) -> str:
    """For a single-line field (a table cell, a name, an id, a log line, an error message): no
    character that could move the cursor, start a new line or reorder what follows."""
    return visible(value)


def lines(value: object) -> str:
    """For text of several lines (a stack, a report, a value's repr): newlines and tabs stay,
    everything else unsafe (ESC, CR, bidi overrides) is escaped."""
    return visible(value, keep="\n\t")


def has_unsafe(text: str) -> bool:
    """Whether `text` holds a character `one_line` would escape."""
    return any(_unsafe(ch) for ch in text)
