"""The broker's DAP front door: one TCP port for every debug session, any DAP client; each
connection is a `DapSession` (dap_session.py). Until a session attached its messages are small
and it has ATTACH_WITHIN_S to do so, with at most DAP_REQUESTS_BEFORE_ATTACH requests and
MAX_UNSENT_BYTES_BEFORE_ATTACH of output it does not read (then the connection is dropped)."""

from __future__ import annotations

import asyncio
import logging

from raysleuth.broker.debug.dap_session import DapSession
from raysleuth.broker.oneport import Gate
from raysleuth.broker.tickets import TicketStore
from raysleuth.dap.framing import bound_reader
from raysleuth.shared.limits import (
    ATTACH_WITHIN_S,
    DAP_BODY_TIMEOUT_S,
    DAP_REQUESTS_BEFORE_ATTACH,
    MAX_DAP_MESSAGE,
    MAX_DAP_MESSAGE_BEFORE_ATTACH,
    MAX_UNSENT_BYTES,
    MAX_UNSENT_BYTES_BEFORE_ATTACH,
)
from raysleuth.shared.swallow import swallowed

log = logging.getLogger(__name__)

QUEUED_REQUESTS = 16
"""Requests of one session read but not yet dispatched at which the door stops reading it (the
client's further bytes wait in its socket, not in the broker's memory)."""


class DapFrontDoor:
    """The listening side: one `DapSession` per connection, over the broker's services."""

    audit: object | None = None
    """The audit log (broker/audit.py) each accepted attach writes a line to, set by the broker."""

    def __init__(self, token: str, token_file, table, leases, crashes, agents, tickets=None) -> None:
        self.token = token
        self.tickets = tickets if tickets is not None else TicketStore()
        """Attach tickets (`POST /v1/tickets`): the broker's one store, shared with the HTTP API."""
        self.token_file = token_file
        self.table = table
        self.leases = leases
        self.crashes = crashes
        self.agents = agents
        self.gate: Gate | None = None
        """The broker's connection cap (oneport.Gate): an attached session is never closed to
        make room for another connection."""
        self._handlers: set[asyncio.Task] = set()
        """Every session's task, held here: once its client half-closes, nothing else refers to
        it and the garbage collector would end it mid-answer (seen by the fuzz tests, #16)."""

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        bound_reader(reader, MAX_DAP_MESSAGE_BEFORE_ATTACH, DAP_BODY_TIMEOUT_S)
        session = DapSession(self, reader, writer)
        session.channel.bound(DAP_REQUESTS_BEFORE_ATTACH, "before an attach", MAX_UNSENT_BYTES_BEFORE_ATTACH)
        session.channel.max_queued = QUEUED_REQUESTS
        me = asyncio.current_task()
        assert me is not None  # asyncio runs every connection's handler in a task
        self._handlers.add(me)
        watch = asyncio.create_task(self._attach_or_close(session, reader, writer))
        try:
            await session.run()
        except (ConnectionError, asyncio.CancelledError) as exc:
            log.info("%s: %s", session, type(exc).__name__)
        except Exception:  # noqa: BLE001 - one session's failure must not end the broker
            log.exception("%s failed", session)
        finally:
            with swallowed(log, "releasing %s", session, level=logging.INFO):
                await session.release()
            await session.channel.close("the front door closed the session")
            watch.cancel()
            self._handlers.discard(me)

    async def _attach_or_close(
        self, session: DapSession, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """A session that attached may send large messages and any number of requests, and
        keeps its connection; one that did not within ATTACH_WITHIN_S is closed (a client that
        only holds a connection open)."""
        try:
            await asyncio.wait_for(session.attached.wait(), ATTACH_WITHIN_S)
        except asyncio.TimeoutError:
            log.info("%s: no attach within %.0f s; closing", session, ATTACH_WITHIN_S)
            await session.channel.close(f"no attach within {ATTACH_WITHIN_S:.0f} s")
            return
        bound_reader(reader, MAX_DAP_MESSAGE)
        session.channel.bound(None, unsent=MAX_UNSENT_BYTES)
        if self.gate is not None:
            self.gate.keep(writer.transport)
