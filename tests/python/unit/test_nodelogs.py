"""A worker's log files found by id or pid and read in whole-line ranges (what the relay serves)."""

from __future__ import annotations

import os

import pytest

from raysleuth.nodelogs import MAX_CHUNK, find_worker_log, read_range

WID = "ab" * 28


def write(tmp_path, name: str, text: str, mtime: float | None = None) -> str:
    p = tmp_path / name
    p.write_text(text)
    if mtime is not None:
        os.utime(p, (mtime, mtime))
    return str(p)


def test_found_by_worker_id_else_by_pid_newest_first(tmp_path):
    old = write(tmp_path, f"worker-{WID}-01000000-77.out", "a\n", mtime=1000)
    new = write(tmp_path, f"worker-{WID}-02000000-77.out", "b\n", mtime=2000)
    write(tmp_path, f"worker-{WID}-02000000-77.err", "e\n")
    assert find_worker_log(str(tmp_path), WID, 77, "out") == new != old
    assert find_worker_log(str(tmp_path), "cd" * 28, 77, "out") == new  # a pid match
    assert find_worker_log(str(tmp_path), "cd" * 28, 78, "out") is None
    with pytest.raises(ValueError, match="stream must be one of out, err"):
        find_worker_log(str(tmp_path), WID, 77, "log")


def test_ranges_follow_a_growing_file_in_whole_lines(tmp_path):
    path = write(tmp_path, "w.out", "one\ntwo\nthr")
    first = read_range(path, 0)
    assert (first["data"], first["next_offset"], first["size"]) == ("one\ntwo\nthr", 11, 11)
    with open(path, "a") as f:
        f.write("ee\nfour\n")
    more = read_range(path, first["next_offset"])
    assert more["data"] == "ee\nfour\n" and more["next_offset"] == more["size"]
    assert read_range(path, more["next_offset"])["data"] == ""


def test_the_tail_starts_at_a_line_and_a_chunk_ends_at_one(tmp_path):
    path = write(tmp_path, "w.err", "".join(f"line {i}\n" for i in range(100)))
    tail = read_range(path, -20)
    assert tail["data"] == "line 98\nline 99\n" and tail["next_offset"] == tail["size"]
    head = read_range(path, 0, max_bytes=15)
    assert head["data"] == "line 0\nline 1\n" and head["next_offset"] == 14
    assert read_range(path, 0, max_bytes=10 * MAX_CHUNK)["next_offset"] == os.path.getsize(path)
