"""Which collective each process group of this worker is in, from torch's flight recorder
(issue 12: "ranks 0-2 wait in gloo:all_reduce #119; rank 3 last entered #118").

Runs in the agent's thread inside a worker. Never imports torch (a program that has not is left
alone), never raises, never prints: anything unexpected reads as "nothing to tell" (None).

Measured with torch 2.13 (CPU, gloo): `_dump_fr_trace_json(includeCollectives=False)` returns
only `pg_status` ({pg name: {last_enqueued_collective, last_completed_collective,
last_started_collective}}) in 0.02 ms. The entries (2000 by default; TORCH_FR_BUFFER_SIZE sets
the number, 0 turns the recorder off and empties `pg_status` too) cost far more, and the call
holds the GIL: a spinning main thread stalled 114 ms for the JSON dump, 56 ms for the pickled
one without stack traces. So the entries (for the op names) are read only when a group is inside
a collective whose name is not known yet: then the task waits in C, not in Python. A group whose
newest collective is done keeps the name learnt while it ran, else "?".
"""

from __future__ import annotations

import json
import pickle
import sys
import threading

_ops: dict[str, tuple[int, str]] = {}
"""Per process group name: the newest (collective_seq_id, profiling_name) seen in the entries."""

_lock = threading.Lock()


def read_flight_recorder() -> list[dict] | None:
    """Per process group of this process, the newest collective it entered:
    [{"group", "rank", "seq", "op", "state"}] with state `scheduled`, `started` or `completed`.

    None when torch is not imported here, no process group exists, or the recorder is off.
    """
    try:
        with _lock:
            return _read()
    except Exception:  # noqa: BLE001 - never into the task: log it and tell nothing
        from raysleuth.agent.log import swallow

        swallow("reading torch's flight recorder")
        return None


def _c10d():
    """torch's c10d bindings, only if the program imported torch.distributed and initialized it."""
    dist = sys.modules.get("torch.distributed")
    torch = sys.modules.get("torch")
    if dist is None or torch is None:
        return None
    if not dist.is_available() or not dist.is_initialized():
        return None
    c10d = getattr(getattr(torch, "_C", None), "_distributed_c10d", None)
    if c10d is None or not hasattr(c10d, "_dump_fr_trace_json"):
        return None
    return c10d


def _read() -> list[dict] | None:
    c10d = _c10d()
    if c10d is None:
        return None
    status = json.loads(c10d._dump_fr_trace_json(includeCollectives=False)).get("pg_status") or {}
    newest = {name: int(s.get("last_enqueued_collective", -1)) for name, s in status.items()}
    newest = {name: seq for name, seq in newest.items() if seq > 0}
    if not newest:
        return None
    if any(
        _ops.get(name, (None,))[0] != seq and _state(status[name], seq) != "completed"
        for name, seq in newest.items()
    ):
        _learn_ops(c10d)
    ranks = _group_ranks()
    out = []
    for name in sorted(newest, key=_name_order):
        seq = newest[name]
        known_seq, op = _ops.get(name, (None, "?"))
        out.append(
            {
                "group": name,
                "rank": ranks.get(name, -1),
                "seq": seq,
                "op": op if known_seq == seq else "?",
                "state": _state(status[name], seq),
                "started": int(status[name].get("last_started_collective", -1)),
                "completed": int(status[name].get("last_completed_collective", -1)),
            }
        )
    return out


def _learn_ops(c10d) -> None:
    """The op name of each group's newest collective, from the full dump (the costly read)."""
    fresh: dict[str, tuple[int, str]] = {}  # rebuilt whole: a re-created group starts at #1 again
    for e in _entries(c10d):
        if e.get("is_p2p"):
            continue  # send/recv count in p2p_seq_id, not in the collective sequence
        pg = e.get("process_group") or ["?"]
        name, seq = str(pg[0]), int(e.get("collective_seq_id", 0))
        if seq >= fresh.get(name, (0, ""))[0]:
            fresh[name] = (seq, str(e.get("profiling_name") or "?"))
    _ops.clear()
    _ops.update(fresh)


def _entries(c10d) -> list[dict]:
    """The recorder's entries: pickled without stack traces where torch offers it (half the
    cost of the JSON dump), else as JSON. Both are torch's own bytes from this very process."""
    dump = getattr(c10d, "_dump_fr_trace", None)
    if dump is not None:
        try:
            raw = dump(includeCollectives=True, includeStackTraces=False)
        except TypeError:  # an older signature: the JSON dump below
            raw = None
        if raw is not None:
            return pickle.loads(raw).get("entries") or []
    return json.loads(c10d._dump_fr_trace_json()).get("entries") or []


def _state(status: dict, seq: int) -> str:
    """gloo leaves each entry's own `state` at `scheduled`: the group's counters tell more."""
    if int(status.get("last_completed_collective", -1)) >= seq:
        return "completed"
    if int(status.get("last_started_collective", -1)) >= seq:
        return "started"
    return "scheduled"


def _group_ranks() -> dict[str, int]:
    """This process's rank in each process group, by the group's name."""
    dist = sys.modules["torch.distributed"]
    out: dict[str, int] = {}
    try:
        for pg, name in dist.distributed_c10d._world.pg_names.items():
            out[str(name)] = int(pg.rank())
    except Exception:  # noqa: BLE001 - torch moved its private registry: the default group only
        from raysleuth.agent.log import swallow

        swallow("reading torch's process group names")
        out["0"] = int(dist.get_rank())
    return out


def _name_order(name: str) -> tuple:
    return (0, int(name), "") if name.isdigit() else (1, 0, name)
