"""Crash records: kept on disk in the broker's state dir, listed newest first, with hints.

A record is one JSON file, `<state_dir>/crashes/<id>.json`, written atomically; the store loads
them at start, so records outlive the broker and the worker. At most `RAYSLEUTH_CRASH_KEEP`
(default 200) are kept: the oldest go first.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
import uuid
from pathlib import Path

from raysleuth.model.crash import KINDS, CrashRecord
from raysleuth.model.wire import CrashSummary
from raysleuth.shared.privfiles import private_dir, write_private

log = logging.getLogger("raysleuth.broker")

KEEP_DEFAULT = 200
RESTART_LOOP_COUNT = 3
RESTART_LOOP_WINDOW_S = 600.0
_ID = re.compile(r"^[A-Za-z0-9_.-]{1,80}$")


def new_id() -> str:
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}"


def valid_id(crash_id: str) -> bool:
    return bool(_ID.match(crash_id or ""))


# --- hints, from the article's table of common errors (../shared/seed) ------------------------

_HINTS: list[tuple[re.Pattern, str]] = [
    (
        re.compile(r"CUDA out of memory|OutOfMemoryError|CUBLAS_STATUS_ALLOC_FAILED", re.I),
        "CUDA ran out of memory on this worker. Try a smaller micro-batch (gradient accumulation keeps "
        "the effective batch), PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True when reserved is "
        "far above allocated (fragmentation), activation checkpointing (torch.utils.checkpoint), "
        "and look for tensors kept across steps (a loss summed without .item(), stored outputs).",
    ),
    (
        re.compile(r"Pickl|serializ|cloudpickle|Can't pickle|cannot pickle", re.I),
        "An object could not be serialized between Ray tasks: pass plain data, or create the "
        "object (lock, socket, CUDA stream, open file) inside the task or actor instead.",
    ),
    (
        re.compile(r"ConnectionRefused|Connection refused|NodeDiedError|node .* (died|lost)|GCS", re.I),
        "A connection between nodes failed: check the firewall and that every node can reach "
        "the head node (ray status); a node may have died.",
    ),
]


def hint_for(rec: CrashRecord, restarts: int = 0) -> str:
    """One line telling the user what to look at first for this record."""
    if restarts >= RESTART_LOOP_COUNT:
        return (
            f"This actor crashed {restarts} times in {RESTART_LOOP_WINDOW_S / 60:.0f} minutes: it is in "
            "a restart loop (max_restarts). Fix the first crash; a restarted actor hits it again."
        )
    kind = rec.kind
    if kind == "oom":
        return (
            "The node ran out of memory and Ray's memory monitor (or the kernel's OOM killer) ended "
            "the worker: lower its memory use or set num_cpus/memory so fewer tasks share a node."
        )
    if rec.ray_check:
        return (
            f"Ray itself aborted this worker with a fatal check ({rec.ray_check.get('check')}): not "
            "your code. The record's ray_check has the line and Ray's stack from "
            f"{rec.ray_check.get('file')}; report it to Ray with that text and your Ray version."
        )
    if kind == "segfault":
        return (
            "Native code crashed the process (segmentation fault): the faulthandler text shows the "
            "Python stack at the fault; look at the C extension called there."
        )
    text = " ".join(
        str(x)
        for x in [
            rec.exc_type,
            rec.message,
            *(c.get("exc_type") for c in rec.chain if isinstance(c, dict)),
        ]
        if x
    )
    for pattern, hint in _HINTS:
        if pattern.search(text):
            if rec.cuda_memory and pattern is _HINTS[0][0]:
                hint += (
                    " The record's cuda_memory has torch's memory summary and the largest live allocations."
                )
            return hint
    if kind == "worker_died" and rec.exit_type == "NODE_DIED":
        return (
            "The worker's node died (removed, preempted or its raylet lost) and the process with "
            "it: look at that node's fate (`ray status`, the cloud's instance events), not the code."
        )
    if kind == "worker_died":
        return (
            "The worker process died (RAY_ERROR_WORKER_DIED): a native crash, os._exit, or a kill "
            "from outside. Its last heartbeat and GPU sample are in the record."
        )
    return "Open the record to see the stack and the locals at the raise site."


# --- the store --------------------------------------------------------------------------------


class CrashStore:
    def __init__(self, state_dir: Path, keep: int | None = None) -> None:
        self.dir = Path(state_dir) / "crashes"
        self.keep = keep if keep is not None else int(os.environ.get("RAYSLEUTH_CRASH_KEEP", KEEP_DEFAULT))
        self._records: dict[str, CrashRecord] = {}
        self._latest: dict[str, CrashRecord] | None = None
        """Worker id → its newest record; rebuilt after a change (the worker table asks often)."""
        self._load()

    def __len__(self) -> int:
        return len(self._records)

    def _load(self) -> None:
        if not self.dir.is_dir():
            return
        for path in self.dir.glob("*.json"):
            try:
                data = json.loads(path.read_text())
                rec = CrashRecord.from_json(data) if isinstance(data, dict) else None
            except (OSError, ValueError, TypeError):
                log.warning("unreadable crash record %s: skipped", path)
                continue
            if rec is not None and valid_id(rec.id):
                self._records[rec.id] = rec
        self._trim()

    def _trim(self) -> None:
        over = len(self._records) - max(1, self.keep)
        if over <= 0:
            return
        self._latest = None
        for rec in sorted(self._records.values(), key=lambda r: r.time or 0)[:over]:
            self._records.pop(rec.id, None)
            try:
                (self.dir / f"{rec.id}.json").unlink()
                (self.dir / f"{rec.id}.rerun").unlink(missing_ok=True)
            except OSError as exc:
                log.warning("could not remove old crash record %s: %s", rec.id, exc)

    def restarts(self, rec: CrashRecord) -> int:
        """Crashes of the same actor within the restart-loop window, this one included."""
        actor = rec.worker.get("actor_id")
        if not actor:
            return 0
        return sum(
            1
            for r in self._records.values()
            if r.worker.get("actor_id") == actor and abs(rec.time - (r.time or 0)) <= RESTART_LOOP_WINDOW_S
        )

    def add(self, rec: dict | CrashRecord) -> CrashRecord:
        """Store a record (an id is given if it has none); returns it with its hint. A failed
        task's call kept for a rerun (`rerun_blob`, a pickle) goes to `<id>.rerun` beside it."""
        blob = rec.pop("rerun_blob", None) if isinstance(rec, dict) else None
        rec = CrashRecord.from_json(rec) if isinstance(rec, dict) else rec
        if not valid_id(rec.id):
            rec.id = new_id()
        if not rec.time:
            rec.time = time.time()
        if rec.kind not in KINDS:
            log.warning("crash record %s has an unknown kind %r", rec.id, rec.kind)
        self._records[rec.id] = rec
        self._latest = None
        rec.hint = hint_for(rec, self.restarts(rec))
        if isinstance(blob, bytes) and rec.rerun is not None:
            try:
                private_dir(self.dir)
                write_private(self.dir / f"{rec.id}.rerun", blob)
            except OSError:
                log.exception("could not keep crash %s's call for a rerun", rec.id)
                rec.rerun = {"unavailable": "the broker could not keep its call"}
        self._write(rec)
        self._trim()
        return rec

    def rerun_blob(self, crash_id: str) -> bytes | None:
        """The failed call kept for a rerun of this crash (a pickle), or None."""
        try:
            return (self.dir / f"{crash_id}.rerun").read_bytes() if valid_id(crash_id) else None
        except OSError:
            return None

    def _write(self, rec: CrashRecord) -> None:
        try:
            private_dir(self.dir)
            write_private(self.dir / f"{rec.id}.json", json.dumps(rec.to_store(), default=str))
        except OSError:
            log.exception("could not write crash record %s", rec.id)

    def get(self, crash_id: str) -> CrashRecord | None:
        return self._records.get(crash_id)

    def records(self) -> list[CrashRecord]:
        return sorted(self._records.values(), key=lambda r: r.time or 0, reverse=True)

    def summaries(self) -> list[CrashSummary]:
        return [r.summary() for r in self.records()]

    def latest_for(self, worker_id: str) -> CrashRecord | None:
        if self._latest is None:
            self._latest = {}
            for r in reversed(self.records()):  # oldest first: the newest wins
                if r.worker_id:
                    self._latest[r.worker_id] = r
        return self._latest.get(worker_id)
