"""The audit trail (#37): every action that runs code in a worker (an evaluate, a breakpoint's
condition, a logpoint's `{…}`, a snapshot's or a watch's expressions, a DAP attach, ending a
worker) is appended to `<state dir>/audit.log`, one JSON object a line, with who asked.

The file is private (0600, opened O_NOFOLLOW|O_APPEND in the 0700 state dir) and bounded
(RAYSLEUTH_AUDIT_MAX_BYTES: it moves to `audit.log.1` at half of it). Writing it never fails an
action: an error is logged, the action goes on. `GET /v1/audit` and `raysleuth audit` read it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from raysleuth.shared.limits import AUDIT_MAX_BYTES
from raysleuth.shared.privfiles import open_private_append
from raysleuth.shared.swallow import swallow_exception

log = logging.getLogger(__name__)

AUDIT_FILE = "audit.log"
MAX_EXPRESSION_CHARS = 4000
"""An expression longer than this is cut in its line (the broker's own bounds are smaller)."""
READ_MAX = 10_000
"""The most lines `GET /v1/audit` answers with."""


class AuditLog:
    """`<state dir>/audit.log`; `str()`: `AuditLog[path]`."""

    def __init__(
        self, state_dir: Path | str, max_bytes: int = AUDIT_MAX_BYTES, clock: Callable[[], float] = time.time
    ) -> None:
        self.path = Path(state_dir) / AUDIT_FILE
        self.old = self.path.with_name(AUDIT_FILE + ".1")
        self.max_bytes = max_bytes
        self.clock = clock

    def __str__(self) -> str:
        return f"AuditLog[{self.path}]"

    def record(
        self,
        action: str,
        *,
        client: dict | None,
        expression: str | None,
        workers: list | None,
        **extra,
    ) -> None:
        """Append one line: {time, action, client, expression, workers, ...extra}."""
        if isinstance(expression, str) and len(expression) > MAX_EXPRESSION_CHARS:
            expression = expression[:MAX_EXPRESSION_CHARS] + "…"
        entry = {
            "time": round(self.clock(), 3),
            "action": action,
            "client": client,
            "expression": expression,
            "workers": workers,
            **extra,
        }
        line = (json.dumps(entry, ensure_ascii=True, default=str) + "\n").encode()
        try:
            self._rotate_for(len(line))
            with open_private_append(self.path) as f:
                f.write(line)
        except OSError:
            swallow_exception(log, "appending to the audit log %s", self.path, level=logging.ERROR)

    def _rotate_for(self, size: int) -> None:
        try:
            now = os.lstat(self.path).st_size
        except FileNotFoundError:
            return
        if now + size > self.max_bytes // 2:
            os.replace(self.path, self.old)

    def tail(self, limit: int) -> list[dict]:
        """The last `limit` entries, oldest first (a line that does not parse is skipped)."""
        out: deque[dict] = deque(maxlen=max(0, limit))
        for path in (self.old, self.path):
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
            except OSError:
                continue
            with os.fdopen(fd, "rb") as f:
                for raw in f:
                    try:
                        entry = json.loads(raw)
                    except ValueError:
                        continue
                    if isinstance(entry, dict):
                        out.append(entry)
        return list(out)


async def client_of(request) -> dict:
    """Who sent an HTTP request: its address and, for a local client, the uid and pid of the
    process behind its socket (from /proc, in a thread: it may scan every process's fds)."""
    transport = getattr(request, "transport", None)
    sock = transport.get_extra_info("socket") if transport is not None else None
    return await client_of_socket(sock, getattr(request, "remote", None))


async def client_of_socket(sock, address: str | None = None) -> dict:
    from raysleuth.shared.peer import peer_of

    out: dict = {"address": address}
    if sock is None:
        return out
    try:
        if address is None:
            name = sock.getpeername()
            address = f"{name[0]}:{name[1]}" if isinstance(name, tuple) else str(name)
            out["address"] = address
        peer = await asyncio.to_thread(peer_of, sock, True)
    except (OSError, ValueError) as exc:
        log.debug("who is behind %s: %r", address, exc)
        return out
    if peer is not None:
        out.update(uid=peer.uid, pid=peer.pid)
    return out


async def audit_attach(door, channel, worker) -> None:
    """The audit line of an accepted DAP attach to a live worker (the client may run any code
    there from then on): who, from the session's socket, and which worker."""
    audit = getattr(door, "audit", None)
    if audit is None:
        return
    try:
        writer = getattr(getattr(channel, "transport", None), "writer", None)
        sock = writer.get_extra_info("socket") if writer is not None else None
        client = await client_of_socket(sock)
        audit.record(
            "attach", client=client, expression=None, workers=[worker.id], ranks=[worker.rank], pid=worker.pid
        )
    except Exception:  # noqa: BLE001 - the attach stands; the log says what failed
        swallow_exception(log, "auditing an attach", level=logging.ERROR)
