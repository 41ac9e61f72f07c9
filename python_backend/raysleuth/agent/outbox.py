"""What the agent sends to the broker besides its report: logpoint lines, snapshots, a watch's
rows, crash records and `raysleuth.event()` records.

Called from user threads: an emit only submits a call (or queues it while no broker is known),
an event or a row is an append; the agent thread sends events with the heartbeat and rows in
batches while it waits for the heartbeat's answer. Never waits except for a crash record's
answer, never raises.
"""

from __future__ import annotations

import collections
import os
import threading
import time

from raysleuth.agent import rank as rank_mod
from raysleuth.agent.log import swallow
from raysleuth.agent.registry import RegistryLink, answer

EVENT_BATCH_MAX = 5000
"""`raysleuth.event()` records kept for the next heartbeat at most (older ones are dropped, counted)."""

PENDING_EMITS_MAX = 500
"""Logpoint lines and snapshots kept while no broker is known (older ones are dropped, counted)."""

RECENT_EVENTS = 200
"""`raysleuth.event()` records kept in the worker for its crash records."""

ROW_BATCH_S = 0.25
"""A divergence watch's rows leave this worker in one call at most this often (the agent thread
sends them): one call per row cost the registry more than the row's summary cost the rank."""

ROWS_MAX = 1000
"""A watch's rows kept for the next batch at most (older ones are dropped, counted)."""


class Outbox:
    """Queues and sends this worker's items to the registry, numbered per worker."""

    def __init__(self, link: RegistryLink, worker_id, wake) -> None:
        self._link = link
        self._worker_id = worker_id
        """A callable: this worker's id, or None before it is known."""
        self._wake = wake
        """Set to wake the agent thread (a queued item wants the registry looked up now)."""
        self.recent: collections.deque = collections.deque(maxlen=RECENT_EVENTS)
        """Last `raysleuth.event()` records of this worker, newest last."""
        self._pending: collections.deque = collections.deque(maxlen=PENDING_EMITS_MAX)
        self._events: collections.deque = collections.deque(maxlen=EVENT_BATCH_MAX)
        """`raysleuth.event()` records not sent to the broker yet (sent with the heartbeat)."""
        self._n = 0
        self._n_lock = threading.Lock()
        self.emit_dropped = 0
        self.events_dropped = 0
        self._rows_lock = threading.Lock()
        self._rows: collections.deque = collections.deque(maxlen=ROWS_MAX)
        self._rows_since = 0.0
        """When the oldest row not sent yet was queued (monotonic)."""
        self.rows_dropped = 0
        self.nudge = threading.Event()
        """Set when a row is queued into an empty batch: the agent thread, in its long poll,
        sends the batch ROW_BATCH_S later (registry.answer_meanwhile)."""

    def emit(self, kind: str, payload: dict) -> None:
        """Send a logpoint line or a snapshot to the broker. From the user's thread: never waits."""
        with self._n_lock:  # numbered so the registry can keep one worker's items in order
            n = self._n
            self._n += 1
        payload = dict(payload, rank=rank_mod.resolve_rank().rank, pid=os.getpid(), n=n)
        registry = self._link.handle
        wid = self._worker_id()
        if registry is None or wid is None:
            # Armed from Ray's KV before the agent thread found the registry: send them then.
            if len(self._pending) == self._pending.maxlen:
                self.emit_dropped += 1
            self._pending.append((kind, payload))
            self._link.look_now()  # look for the registry now, not at the next retry
            self._wake.set()
            return
        try:
            registry.emit.remote(wid, kind, payload)
        except Exception:  # noqa: BLE001 - counted; the next heartbeat finds the broker again
            self.emit_dropped += 1
            swallow("sending a %s to the registry", kind)

    def emit_row(self, payload: dict) -> None:
        """Queue a divergence watch's row for the next batch. From the user's thread: an append."""
        payload = dict(payload, rank=rank_mod.resolve_rank().rank, pid=os.getpid())
        with self._rows_lock:
            first = not self._rows
            if first:
                self._rows_since = time.monotonic()
            elif len(self._rows) == self._rows.maxlen:
                self.rows_dropped += 1
            self._rows.append(payload)
        if first:
            self.nudge.set()

    def flush_rows(self, force: bool = False) -> float | None:
        """Send the queued rows in one item if the oldest waited ROW_BATCH_S (or `force`); the
        seconds until they are due, or None when none wait (agent thread)."""
        with self._rows_lock:
            if not self._rows:
                return None
            due = self._rows_since + ROW_BATCH_S - time.monotonic()
            if due > 0 and not force:
                return due
            batch = list(self._rows)
            self._rows.clear()
            dropped, self.rows_dropped = self.rows_dropped, 0
        self.emit("rows", {"items": batch, "dropped": dropped})
        return None

    def flush_emits(self) -> None:
        """Send what was queued while no broker was known (agent thread)."""
        wid = self._worker_id()
        while self._pending and self._link.handle is not None:
            kind, payload = self._pending.popleft()
            try:
                self._link.handle.emit.remote(wid, kind, payload)
            except Exception:  # noqa: BLE001
                self.emit_dropped += 1
                swallow("sending a queued %s to the registry", kind)

    def record_event(self, record: dict, disabled: bool, keep: dict | None = None) -> None:
        """From the user's thread: an append, no call (the agent thread sends them in batches).
        The recent ring (crash records) takes `keep` instead when given: an inspect's rows go
        to the broker, not into every crash record."""
        self.recent.append(keep if keep is not None else record)
        if disabled:
            return
        if len(self._events) == self._events.maxlen:
            self.events_dropped += 1
        self._events.append(record)

    def flush_events(self) -> None:
        if not self._events or self._link.handle is None or self._worker_id() is None:
            return
        batch = []
        while self._events and len(batch) < EVENT_BATCH_MAX:
            batch.append(self._events.popleft())
        dropped, self.events_dropped = self.events_dropped, 0
        self.emit("events", {"items": batch, "dropped": dropped})

    def send_crash(self, record: dict, timeout: float, log) -> dict | None:
        """Send a crash record from the failing task's thread and wait for {id, hold, watched}.

        Without a broker the record waits with the logpoint lines for one to appear.
        """
        wid = self._worker_id()
        if wid is None:
            return None
        registry = self._link.handle
        if registry is None:
            self._link.look_now()
            registry = self._link.lookup()
        if registry is not None:
            try:
                return answer(registry.crash.remote(wid, record), timeout)
            except Exception as exc:  # noqa: BLE001
                log.info("sending a crash record failed (%s); it waits for the broker", type(exc).__name__)
        self.emit("crash", record)
        return None
