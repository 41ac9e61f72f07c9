"""Text from the cluster reaches a terminal escaped (#37): the one function that does it, and the
CLI's tables and reports built from hostile names, messages and paths."""

from __future__ import annotations

import unicodedata

import pytest

from raysleuth.cli import breaks, cases, collectives, crashes, doctor, events, groups, inspect, stacks
from raysleuth.cli.table import format_workers
from raysleuth.shared.textsafe import has_unsafe, lines, one_line

EVIL = "\x1b[31mX\nFAKE  ROW"
"""An actor name that paints the line red and forges a row of its own."""

HOSTILE = [
    "\x1b]0;title\x07",  # OSC: sets the terminal's title; BEL ends it
    "\x1b[2J\x1b[H",  # clear the screen, cursor home
    "ok\rFORGED",  # CR: the rest overwrites the start of the line
    "\x9b31m",  # C1 CSI: an 8-bit ESC [
    "\x7f\x00\x08",  # DEL, NUL, backspace
    "admin\u202egnp.exe",  # RIGHT-TO-LEFT OVERRIDE: shows as "adminexe.png"
    "\u2066hidden\u2069 \u200b\ufeff",  # isolates, a zero-width space, a BOM
    "a\u2028b\u2029c",  # line and paragraph separators
    "\udcff",  # a lone surrogate (an undecodable byte): `print` would raise
    "\U000e0041",  # a TAG character: invisible
]


def raw_controls(text: str, allowed: str = "") -> list[str]:
    """The characters of `text` a terminal would act on or hide, but for those in `allowed`."""
    bad = {"Cc", "Cf", "Cs", "Zl", "Zp"}
    return [c for c in text if c not in allowed and unicodedata.category(c) in bad]


def test_one_line_escapes_every_control_and_format_character_visibly():
    assert one_line(EVIL) == "\\x1b[31mX\\nFAKE  ROW"
    assert one_line("tab\there") == "tab\\there"
    assert one_line("admin\u202egnp.exe") == "admin\\u202egnp.exe"
    assert one_line("\x9b31m") == "\\x9b31m"
    assert one_line("\U000e0041") == "\\U000e0041"
    assert one_line("\udcff") == "\\udcff"
    for text in HOSTILE:
        out = one_line(text)
        assert raw_controls(out) == [] and out.isprintable(), (text, out)
        assert has_unsafe(text) and not has_unsafe(out)


def test_plain_text_and_letters_of_every_script_are_left_alone():
    for text in ["train.py:42 in fit", "rank 3 · pid 812", "Größe", "日本語", "emoji 🚀", "a\\x1b b", ""]:
        assert one_line(text) == text and lines(text) == text
    assert one_line(42) == "42" and one_line(None) == "None"


def test_lines_keeps_newlines_and_tabs_but_escapes_the_rest():
    assert lines("a\n\tb\x1b[0m\r") == "a\n\tb\\x1b[0m\\r"
    for text in HOSTILE:
        assert raw_controls(lines(text), allowed="\n\t") == []


def test_escaping_twice_changes_nothing():
    for text in [*HOSTILE, EVIL]:
        assert one_line(one_line(text)) == one_line(text) and lines(lines(text)) == lines(text)


def test_a_forged_row_in_an_actor_name_is_one_escaped_cell_of_one_row():
    w = {
        "id": "0123456789abcdef", "pid": 4242, "node_ip": "127.0.0.1", "node_id": "ab12cd",
        "actor_class": "Trainer", "actor_name": EVIL, "task": "fit\x1b[2J", "rank": 0,
        "state": "paused", "paused_at": {"path": "/a\u202e.py", "line": 3}, "agent": True,
    }  # fmt: skip
    out = format_workers([w])
    assert out.count("\n") == 1 and raw_controls(out, allowed="\n") == []
    row = out.splitlines()[1]
    assert "Trainer '\\x1b[31mX\\nFAKE  ROW'" in row and "fit\\x1b[2J" in row and "/a\\u202e.py:3" in row


def test_every_cli_report_escapes_the_clusters_text():
    crash = {
        "id": "c1" + EVIL, "time": 1.0, "kind": "exception", "exc_type": "ValueError\x1b[0m",
        "message": "bad\x1b]0;pwned\x07\nsecond line", "hint": "h\x1b", "worker": {"rank": 1, "task": EVIL},
        "frames": [{"path": "/x\rY.py", "line": 1, "function": "f\u202e", "locals": {"k\x1b": "v\nw"}}],
        "faulthandler": "Thread\x1b[1m 1\n  File x",
    }  # fmt: skip
    case = {"id": "k1", "time": 1.0, "kind": "hang", "summary": EVIL, "hint": "\x1b[5m",
            "job_id": "j\x1b", "evidence": {"text": "stack\x1b[8m\nline"}}  # fmt: skip
    outs = {
        "crashes list": crashes.format_list([crash]),
        "crashes detail": crashes.format_detail(crash),
        "cases list": cases.format_list([case]),
        "cases detail": cases.format_detail(case),
        "collectives": collectives.format_queue([{"group": EVIL, "rank": 0, "op": "all\u202ereduce"}]),
        "events": events.format_list(
            [{"seq": 1, "time": 1.0, "rank": 0, "name": EVIL, "fields": {"x": EVIL}}]
        ),
        "stacks": stacks.format_result({"text": "a\x1b[2Jb\nc", "workers": []}),
        "tree": stacks.format_trees(
            {
                "tree": {
                    "job_id": EVIL,
                    "function": "f\nFAKE",
                    "line": 1,
                    "path": "/p",
                    "ranks": [0],
                    "workers": ["w"],
                    "children": [],
                }
            }  # fmt: skip
        ),
        "hang": stacks.format_hang({"job_id": EVIL, "ranks_text": "0\x1b", "samples": 3, "text": "t\x1b"}),
        "groups": groups.format_groups([{"name": EVIL, "ranks": [0], "expression": "x\x1b"}]),
        "inspect": inspect.format_table(
            [{"name": EVIL, "step": 1, "rank": 0, "dtype": "f\x1b", "differs": True, "why": "w\n"}]
        ),
        "doctor": doctor.format_report(
            {"ok": False, "broker": [{"status": "warn", "check": "c\x1b", "detail": EVIL, "hint": "h\r"}]}
        ),
        "break": breaks.describe({"path": "/p\x1b.py", "line": 1, "logMessage": EVIL, "owner": "o\n"}),
        "logs": breaks.format_log({"rank": 0, "message": EVIL}),
    }
    for what, out in outs.items():
        assert raw_controls(out, allowed="\n") == [], (what, out)
        assert "FAKE  ROW" not in out.split("\n") and "\nFAKE" not in out.replace("\nFAKE  ROW", ""), what
    assert outs["crashes list"].count("\n") == 1 and outs["cases list"].count("\n") == 0
    assert outs["logs"] == "[rank 0] \\x1b[31mX\\nFAKE  ROW"
    assert "bad\\x1b]0;pwned\\x07\nsecond line" in outs["crashes detail"]  # a message keeps its lines


@pytest.mark.parametrize("line", ["\x1b[31mX\nFAKE  ROW", "\u202e", "\udcff"])
def test_an_error_message_is_printed_escaped(capsys, line):
    from raysleuth.cli import _error

    assert _error(f"No crash record {line}.", f"hint {line}") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 2 and raw_controls(err, allowed="\n") == []
