"""Capture's bounds on values a crash may hold: a `__repr__` that hangs, and buffers of 1 GB.

The integration fault test (tests/python/integration/test_faults.py) checks the same on a real
worker; these pin each rule alone."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from raysleuth.agent import capture
from raysleuth.model.tensors import TEXT_MAX_HOST_ELEMENTS

GB = 1 << 30
BIG = 1 << 28  # 256 MB: before the rule for bytes, its repr alone took about 7 s


class HangsInRepr:
    """A `__repr__` that waits for a lock nobody releases (the task holds it)."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def __repr__(self) -> str:
        self.release.wait(60)
        return "released"


def timed(fn, *args):
    t0 = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t0


def test_bytes_and_bytearray_of_hundreds_of_megabytes_repr_their_head_in_no_time():
    for value, head in ((bytearray(BIG), "bytearray(b'"), (bytes(BIG), "b'")):
        text, took = timed(capture.bounded_repr, value)
        assert took < 0.05, f"{type(value).__name__}: {took:.3f} s"
        assert text.startswith(head + "\\x00") and text.endswith(f"<{BIG} bytes>") and len(text) < 300
        del value
    assert capture.bounded_repr(b"ab'c") == repr(b"ab'c")  # short ones as Python writes them
    assert capture.bounded_repr(bytearray(b"xy")) == "bytearray(b'xy')"


def test_host_arrays_past_the_bound_give_shape_and_dtype_without_statistics():
    big = np.zeros(GB, dtype=np.uint8)  # calloc: no page touched
    text, took = timed(capture.bounded_repr, big)
    assert took < 0.05 and text == f"ndarray[{GB}] uint8 <{GB:,} elements: too many to summarize here>"


def test_host_tensors_past_the_bound_too():
    torch = pytest.importorskip("torch")  # the 3.12 venv has no torch
    t = torch.zeros(TEXT_MAX_HOST_ELEMENTS + 1)
    assert "too many to summarize" in capture.bounded_repr(t)
    at_bound = torch.ones(TEXT_MAX_HOST_ELEMENTS)
    assert capture.bounded_repr(at_bound).endswith("norm=4.1e+03 nan=0")


def test_a_hanging_repr_is_given_up_within_its_limit_and_the_rest_captured():
    stuck = HangsInRepr()
    try:
        values = [1, stuck, "after", bytearray(BIG)]
        texts, took = timed(capture.safe_reprs, values)
        assert took < capture.REPR_LIMIT_S + 0.5, f"{took:.2f} s"
        assert texts[0] == "1" and texts[2] == "'after'"
        assert texts[1] == "<repr took over 200 ms: test_capture_bounds.HangsInRepr>"
        assert texts[3].endswith(f"<{BIG} bytes>")
        # Three hangs in one capture: the rest is skipped, still within the total bound.
        many = [HangsInRepr() for _ in range(5)]
        texts, took = timed(capture.safe_reprs, [*many, 2])
        assert took < capture.MAX_STUCK * capture.REPR_LIMIT_S + 0.5, f"{took:.2f} s"
        assert texts[-1] == "<not captured: reprs took too long>"
        for m in many:
            m.release.set()
    finally:
        stuck.release.set()


class SpinsInRepr:
    """A `__repr__` that loops in Python for ever (until told to stop), counting its rounds."""

    def __init__(self) -> None:
        self.rounds = 0
        self.stop = False

    def __repr__(self) -> str:
        while not self.stop:
            self.rounds += 1
        return "stopped"


def test_a_repr_looping_in_python_is_stopped_not_left_spinning():
    spin = SpinsInRepr()
    try:
        texts, took = timed(capture.safe_reprs, [spin, 3])
        assert texts == ["<repr took over 200 ms: test_capture_bounds.SpinsInRepr>", "3"]
        assert took < capture.REPR_LIMIT_S + 0.5, f"{took:.2f} s"
        left = [t for t in threading.enumerate() if t.name == "raysleuth-repr"]

        def settled():
            before = spin.rounds
            time.sleep(0.05)  # two reads apart: the count moves only while the loop spins
            return spin.rounds == before

        deadline = time.monotonic() + 2
        while not settled():
            assert time.monotonic() < deadline, "the abandoned repr still spins"
        assert len([t for t in left if t.is_alive()]) <= 1  # the fresh one for the value after
    finally:
        spin.stop = True
