"""One DAP message channel: framing, outgoing seq, request/response correlation, events and
incoming requests, over any transport (a socket, or bytes carried by Ray calls to a node relay).

Both sides use it: the broker's links to debugpy, the terminal debugger and the tests as clients;
the DAP front door as a server. Standard library only: it must never import the broker or the
agent.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from raysleuth.dap.errors import ENDED, ChannelClosed, DapTimeout
from raysleuth.dap.eventwait import EventWaits
from raysleuth.dap.framing import FramingError, encode, read_message, response_to, seq_of
from raysleuth.dap.transport import CallTransport, Overrun, Transport, as_transport, pump_polls
from raysleuth.shared.swallow import swallow_exception

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_REQUEST_TIMEOUT_S", "ENDED", "ChannelClosed", "DapChannel", "DapTimeout"]

DEFAULT_REQUEST_TIMEOUT_S = 60.0
"""Longest wait for the answer to one request unless the caller says otherwise."""

EventCallback = Callable[[dict], object]
RequestHandler = Callable[[dict], Awaitable[bool | None]]
ClosedCallback = Callable[[str], object]


# --- the channel ------------------------------------------------------------------------------


class _Pending:
    __slots__ = ("command", "future")

    def __init__(self, command: str, future: asyncio.Future) -> None:
        self.command = command
        self.future = future


class DapChannel(EventWaits):
    """One DAP connection. `str()` is the `name` it was given.

    Outgoing: `request` (correlated by seq, with a timeout), `respond`, `event`, `send`.
    Incoming: responses resolve requests; events go to `on_event` (called, and awaited if it
    returns an awaitable, in arrival order in the reader task, before anything later is read)
    and/or to the queue read by `wait_event`; requests go to `on_request`, one at a time in
    arrival order, in a task of their own so a handler may itself send requests (a handler
    that returns False ends the channel, like DAP `disconnect`). Call `start()` (or `run()`)
    once.
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter | Transport | Callable[[bytes], Awaitable[Any]],
        *,
        name: object = "DapChannel",
        on_event: EventCallback | None = None,
        on_request: RequestHandler | None = None,
        on_closed: ClosedCallback | None = None,
        queue_events: bool | None = None,
        feed: Callable[[], Coroutine[Any, Any, None]] | None = None,
    ) -> None:
        """`queue_events` defaults to True when there is no `on_event` (else nobody would drain
        the queue). `feed`, if given, is run by the channel and cancelled by `close()`: the task
        that fills `reader` (see `over_polls`). `on_closed(reason)` runs once, sync or async."""
        self.name = name
        self.reader = reader
        self.transport = as_transport(writer)
        self.on_event = on_event
        self.on_request = on_request
        self.on_closed = on_closed
        self.queue_events = on_event is None if queue_events is None else queue_events
        self.events: list[dict] = []
        """Events not yet taken by `wait_event`/`next_event` (only when `queue_events`)."""
        self.closed = asyncio.Event()
        self.close_reason: str | None = None
        self._feed = feed
        self._seq = 0
        self._pending: dict[int, _Pending] = {}
        self._unanswered: dict[int, dict] = {}
        self._event_added = asyncio.Condition()
        self._requests: asyncio.Queue[dict | None] = asyncio.Queue()
        self._tasks: dict[str, asyncio.Task] = {}
        self._requests_left: int | None = None
        self._requests_why = ""
        self.max_queued: int | None = None
        """Requests read but not yet handed to `on_request` at which reading waits (None: no bound)."""
        self._room = asyncio.Event()
        self._room.set()

    def bound(self, requests: int | None = None, why: str = "", unsent: int | None = None) -> None:
        """Take at most `requests` more requests, then close the channel ("more than N requests
        {why}"), and drop the connection when the peer leaves over `unsent` bytes unread (see
        Transport.max_unsent). None lifts a bound."""
        self._requests_left, self._requests_why = requests, f"more than {requests} requests {why}"
        self.transport.max_unsent = unsent

    def __str__(self) -> str:
        return str(self.name)

    @classmethod
    async def connect(cls, host: str | None, port: int | None, path: str | None = None, **kw) -> DapChannel:
        """A started channel over a new TCP connection, or an AF_UNIX one to `path`."""
        opening = asyncio.open_unix_connection(path) if path else asyncio.open_connection(host, port)
        reader, writer = await opening
        return cls(reader, writer, **kw).start()

    @classmethod
    def over_polls(
        cls,
        send: Callable[[bytes], Awaitable[Any]],
        poll: Callable[[], Awaitable[tuple[bytes, bool]]],
        close: Callable[[], Awaitable[Any]] | None = None,
        **kwargs,
    ) -> DapChannel:
        """A channel whose bytes are carried by calls (the broker's node relay): `send(data)`
        (False: gone), `poll()` long-polls for `(bytes, ended)`, `close()` ends the far end."""
        reader = asyncio.StreamReader()
        feed = functools.partial(pump_polls, reader, poll, kwargs.get("name", "DapChannel"))
        return cls(reader, CallTransport(send, close), feed=feed, **kwargs)

    # --- running ------------------------------------------------------------------------------

    def start(self) -> DapChannel:
        if self._tasks:
            raise RuntimeError(f"{self} started twice")
        if self._feed is not None:
            self._tasks["feed"] = asyncio.create_task(self._feed())
        self._tasks["read"] = asyncio.create_task(self._read_loop())
        if self.on_request is not None:
            self._tasks["dispatch"] = asyncio.create_task(self._dispatch_loop())
        return self

    async def run(self) -> str:
        """Start (if need be) and wait until the channel closes; returns why it closed."""
        if not self._tasks:
            self.start()
        await self.closed.wait()
        dispatch = self._tasks.get("dispatch")
        if dispatch is not None and dispatch is not asyncio.current_task():
            await asyncio.wait([dispatch])  # the handler of the last request finishes first
        return self.close_reason or ENDED

    async def _read_loop(self) -> None:
        reason = ENDED
        try:
            while True:
                await self._room.wait()  # too many requests not handled yet: the peer waits
                msg = await read_message(self.reader)
                if msg is None:
                    break
                await self._on_message(msg)
        except (FramingError, asyncio.IncompleteReadError) as exc:
            reason = f"bad bytes from the peer: {exc}"
            log.info("%s: %s; closing", self, reason)
        except Overrun as exc:  # the owner's bound: its end-of-session line says why
            self.transport.abort()
            reason = str(exc)
        except Exception as exc:  # noqa: BLE001 - a reader that dies must close, not hang (#16)
            reason = f"the connection failed: {type(exc).__name__}: {exc}"
            log.log(logging.INFO if isinstance(exc, OSError) else logging.ERROR, "%s: %s", self, reason)
        await self._finish(reason)

    async def _on_message(self, msg: dict) -> None:
        kind = msg.get("type")
        if kind == "response":
            answered = seq_of(msg, "request_seq")
            pending = self._pending.pop(answered, None) if answered is not None else None
            if pending is not None and not pending.future.done():
                pending.future.set_result(msg)
            else:
                log.debug("%s: a response nobody waits for (late?): %s", self, msg.get("command"))
        elif kind == "event":
            if self.on_event is not None:
                try:
                    result = self.on_event(msg)
                    if inspect.isawaitable(result):
                        await result
                except Exception:  # noqa: BLE001 - one bad callback must not end the channel
                    swallow_exception(log, "%s: the event callback failed on %r", self, msg.get("event"))
            if self.queue_events:
                async with self._event_added:
                    self.events.append(msg)
                    self._event_added.notify_all()
        elif kind == "request":
            if self.on_request is None:
                await self.respond(msg, error=f"{self} does not take requests ({msg.get('command')!r}).")
            elif (seq := seq_of(msg)) is None:  # found by the fuzz tests (#16): a list ended the reader
                await self.respond(msg, error=f"A request's seq must be an integer, not {msg.get('seq')!r}.")
            else:
                if self._requests_left is not None:
                    if self._requests_left <= 0:
                        raise Overrun(self._requests_why)
                    self._requests_left -= 1
                self._unanswered[seq] = msg
                self._requests.put_nowait(msg)
                if self.max_queued is not None and self._requests.qsize() >= self.max_queued:
                    self._room.clear()
        else:
            log.debug("%s: ignoring a message of type %r", self, kind)

    async def _dispatch_loop(self) -> None:
        while True:
            request = await self._requests.get()
            self._room.set()
            if request is None:
                return
            command = request.get("command")
            handler = self.on_request
            try:
                if handler is None:  # taken away since the request was queued
                    raise RuntimeError(f"{self} takes no more requests")
                keep = await handler(request)
            except Exception as exc:  # noqa: BLE001 - answer the client, keep the session
                log.exception("%s: handling %r failed", self, command)
                keep = True
                if seq_of(request) in self._unanswered:
                    await self.respond(request, error=f"{command} failed: {type(exc).__name__}: {exc}")
            if keep is False:
                await self.close(f"ended after {command!r}")
                return

    # --- sending ------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self.closed.is_set():
            raise ChannelClosed(f"{self} is closed: {self.close_reason}", self.close_reason)

    def _stamp(self, message: dict) -> tuple[int, bytes]:
        self._seq += 1
        return self._seq, encode(dict(message, seq=self._seq))

    async def _emit(self, data: bytes) -> None:
        try:
            await self.transport.send(data)
        except ChannelClosed as exc:
            raise ChannelClosed(f"{self}: {exc}", exc.reason) from exc
        except Overrun as exc:  # dropped: the peer did not read
            await self._finish(str(exc))
            raise ChannelClosed(f"{self}: {exc}", str(exc)) from exc
        except (ConnectionError, OSError) as exc:
            raise ChannelClosed(f"{self}: cannot send: {exc}", str(exc)) from exc

    async def send(self, message: dict) -> int:
        """Send one message (a copy gets the next seq); returns that seq. Raises ChannelClosed."""
        self._check_open()
        seq, data = self._stamp(message)
        await self._emit(data)
        return seq

    async def send_request(self, command: str, arguments: dict | None = None) -> asyncio.Future:
        """Send without waiting; the returned future resolves to the response (or fails with
        ChannelClosed). Prefer `request`, which also forgets a request that timed out."""
        return (await self._start_request(command, arguments))[1]

    async def _start_request(self, command: str, arguments: dict | None) -> tuple[int, asyncio.Future]:
        self._check_open()
        msg: dict = {"type": "request", "command": command}
        if arguments is not None:
            msg["arguments"] = arguments
        seq, data = self._stamp(msg)
        fut = asyncio.get_running_loop().create_future()
        self._pending[seq] = _Pending(command, fut)  # before sending: the answer may come first
        try:
            await self._emit(data)
        except BaseException:
            self._pending.pop(seq, None)
            raise
        return seq, fut

    async def request(
        self,
        command: str,
        arguments: dict | None = None,
        *,
        timeout: float | None = DEFAULT_REQUEST_TIMEOUT_S,
    ) -> dict:
        """Send a request and return its response, successful or not. Raises DapTimeout after
        `timeout` s (None: no limit) and ChannelClosed if the channel closes first."""
        seq, fut = await self._start_request(command, arguments)
        try:
            return await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            raise DapTimeout(f"{self}: no answer to {command!r} (seq {seq}) in {timeout:g} s") from None
        finally:
            self._pending.pop(seq, None)

    async def respond(
        self, request: dict, body: dict | None = None, error: str | None = None, show_user: bool = True
    ) -> bool:
        """Answer `request` (see `response_to`). False when the peer is gone (not an error: a
        client may leave at any time)."""
        seq = seq_of(request)
        if seq is not None:
            self._unanswered.pop(seq, None)
        return await self._send_quietly(response_to(request, body, error, show_user), answer=True)

    async def event(self, event: str, body: dict | None = None) -> bool:
        """Send an event; False when the peer is gone."""
        return await self._send_quietly({"type": "event", "event": event, "body": body or {}})

    async def _send_quietly(self, msg: dict, answer: bool = False) -> bool:
        try:
            if answer and self.close_reason == ENDED:  # a half-close: the peer still reads (#16)
                await self._emit(self._stamp(msg)[1])
            else:
                await self.send(msg)
            return True
        except ChannelClosed:
            what = msg.get("command") or msg.get("event")
            swallow_exception(
                log, "%s: sending %s %r: the peer is gone", self, msg["type"], what, level=logging.DEBUG
            )
            return False

    # --- closing ------------------------------------------------------------------------------

    async def close(self, reason: str = "closed by this side") -> None:
        """Stop reading, close the transport, fail pending requests with ChannelClosed(reason).
        Requests received but not yet handled are dropped; the one being handled finishes."""
        if not self.closed.is_set():
            me = asyncio.current_task()
            for key in ("feed", "read"):
                task = self._tasks.get(key)
                if task is not None and task is not me:
                    task.cancel()
            while not self._requests.empty():
                self._requests.get_nowait()
        try:
            await self.transport.close()
        except Exception:  # noqa: BLE001 - the far end may be gone already
            swallow_exception(log, "%s: closing the transport", self, level=logging.DEBUG)
        await self._finish(reason)

    async def _finish(self, reason: str) -> None:
        if self.closed.is_set():
            return
        self.close_reason = reason
        self.closed.set()
        pending, self._pending = self._pending, {}
        for p in pending.values():
            if not p.future.done():
                p.future.set_exception(
                    ChannelClosed(f"{self} closed before answering {p.command!r}: {reason}", reason)
                )
        if reason != ENDED:  # after a half-close, what came before it is still answered
            self._unanswered.clear()
            while not self._requests.empty():
                self._requests.get_nowait()
        self._requests.put_nowait(None)
        async with self._event_added:
            self._event_added.notify_all()
        if self.on_closed is not None:
            try:
                result = self.on_closed(reason)
                if inspect.isawaitable(result):
                    await result
            except Exception:  # noqa: BLE001 - the channel is closed either way
                swallow_exception(log, "%s: the on_closed callback failed", self)
