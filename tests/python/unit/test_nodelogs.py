"""A worker's log files found by id or pid and read in whole-line ranges (what the relay serves)."""

from __future__ import annotations

import os

import pytest

from raysleuth.probes.logs import (
    MAX_CHUNK,
    fatal_checks,
    fatal_in_text,
    find_worker_log,
    read_range,
    worker_fatal_check,
)

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


# Ray 2.60's abort as it stands in a worker's .err (a fatal line, then Ray's stack).
RAY_ABORT = (
    "[2026-12-04 10:00:00,123 I 4051 4051] core_worker.cc:500: Constructing CoreWorker\n"
    "[2026-12-04 10:00:10,456 C 4051 4054] shared_lru.h:66:  An unexpected system state has occurred. "
    "You have likely discovered a bug in Ray. Please report this issue. Check failed: value != nullptr \n"
    "*** StackTrace Information ***\n"
    "ray::utils::container::SharedLruCache<>::Put()\n"
    "ray::core::CoreWorker::OverrideTaskOrActorRuntimeEnvInfo()\n"
)


def test_a_fatal_check_is_named_with_its_place_and_condition(tmp_path):
    found = fatal_in_text(RAY_ABORT)
    assert found["check"] == "shared_lru.h:66: Check failed: value != nullptr"
    assert found["text"].splitlines()[0].startswith("[2026-12-04 10:00:10,456 C")
    assert "OverrideTaskOrActorRuntimeEnvInfo" in found["text"]
    # Older Rays put the condition on the next line; other levels and user text are not fatal.
    assert fatal_in_text("[2026-12-04 10:00:10,456 C 1 2] a.cc:9: boom\n x Check failed: a == b\n")[
        "check"
    ] == ("a.cc:9: Check failed: a == b")
    assert fatal_in_text("[2026-12-04 10:00:10,456 E 1 2] a.cc:9: Check failed: x\n") is None
    assert fatal_in_text("print: Check failed: my own test said so\n") is None


def test_the_fatal_check_of_one_worker_and_of_a_whole_session(tmp_path):
    write(tmp_path, f"worker-{WID}-01000000-77.err", "hello\n" + RAY_ABORT)
    write(tmp_path, f"python-core-worker-{WID}_77.log", RAY_ABORT)
    write(tmp_path, f"worker-{'cd' * 28}-01000000-78.err", "a user's own stderr\n")
    write(tmp_path, "raylet.out", RAY_ABORT)  # not a worker's log: not scanned
    one = worker_fatal_check(str(tmp_path), WID, 77)
    assert one["check"] == "shared_lru.h:66: Check failed: value != nullptr"
    assert one["file"].endswith(f"worker-{WID}-01000000-77.err")
    assert worker_fatal_check(str(tmp_path), None, 77)["check"] == one["check"]  # by pid alone
    assert worker_fatal_check(str(tmp_path), "cd" * 28, 78) is None
    everything = fatal_checks(str(tmp_path))
    assert sorted((os.path.basename(f["file"]), f["line"]) for f in everything) == [
        (f"python-core-worker-{WID}_77.log", 2),
        (f"worker-{WID}-01000000-77.err", 3),
    ]
