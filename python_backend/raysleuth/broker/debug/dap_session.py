"""One debug session of the DAP front door: the broker answers `initialize` itself; `attach
{ticket | token, worker | rank | crash}` leases the worker's link (one debugpy connection per
worker) or replays a crash record, and from then on requests and events pass through, with paths
mapped.
Ending a session leaves the worker running and its link open.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

from raysleuth.broker.debug import rayframes
from raysleuth.broker.debug.dap_scopes import merge_scoped, scope_breakpoints
from raysleuth.broker.debug.links import LinkClosed, WorkerLink
from raysleuth.broker.debug.targets import resolve_target
from raysleuth.broker.debug.waits import held_worker, with_agent
from raysleuth.broker.postmortem.replay import QUIET_EVALUATE, RUN_COMMANDS
from raysleuth.broker.tickets import admit_attach
from raysleuth.dap.channel import DapChannel
from raysleuth.dap.paths import PathMapper
from raysleuth.dap.requests import DAP_REQUESTS
from raysleuth.shared.errors import SleuthError

if TYPE_CHECKING:
    from raysleuth.broker.debug.leases import LinkLeases
    from raysleuth.broker.postmortem.crashes import CrashStore
    from raysleuth.broker.postmortem.replay import Replay
    from raysleuth.broker.tickets import TicketStore
    from raysleuth.broker.workers.agents import Agents
    from raysleuth.broker.workers.table import WorkerTable


class Door(Protocol):
    """What a session needs of its front door (dap_front.DapFrontDoor): the broker's services."""

    token: str
    tickets: TicketStore
    table: WorkerTable
    leases: LinkLeases
    crashes: CrashStore
    agents: Agents


log = logging.getLogger(__name__)

CAPABILITIES = {
    "supportsConfigurationDoneRequest": True,
    "supportsConditionalBreakpoints": True,
    "supportsHitConditionalBreakpoints": True,
    "supportsLogPoints": True,
    "supportsEvaluateForHovers": True,
    "supportsSetVariable": True,
    "supportsSetExpression": True,
    "supportsFunctionBreakpoints": True,
    "supportsDelayedStackTraceLoading": True,
    "supportsExceptionInfoRequest": True,
    "supportsValueFormattingOptions": True,
    "supportsTerminateRequest": True,
    "supportTerminateDebuggee": False,
    "supportsGotoTargetsRequest": True,
    "supportsClipboardContext": True,
    "supportsStepInTargetsRequest": True,
    "exceptionBreakpointFilters": [
        {"filter": "raised", "label": "Raised Exceptions", "default": False},
        {"filter": "uncaught", "label": "Uncaught Exceptions", "default": True},
    ],
}
"""What the broker announces before it knows the worker: debugpy's usual set."""


class DapSession:
    """One client connection on the front door. `str()` names it: `DapSession[3 rank=2]`."""

    _next_id = 0

    def __init__(self, door: Door, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        DapSession._next_id += 1
        self.id = DapSession._next_id
        self.door = door
        self.channel = DapChannel(reader, writer, name=self, on_request=self.on_request, queue_events=False)
        """The client's connection: requests come to `on_request`, answers go back through it."""
        self.link: WorkerLink | None = None
        self.paths = PathMapper()
        self.breakpoint_sources: set[str] = set()
        """Worker-side paths this session set breakpoints in (cleared when it ends)."""
        self.configured = False
        self.replay: Replay | None = None
        """A read-only session over a stored crash record (attach {crash})."""
        self._tasks: set[asyncio.Task] = set()
        self.client_progress = False
        """The client shows DAP progress events (VS Code): attach steps go there, not to the
        Debug Console."""
        self._progress_id: str | None = None
        self.attached = asyncio.Event()
        """Set once an attach (to a worker, or to a crash record) was accepted."""
        self.ended: str | None = None
        """Why the session lost its worker (the link closed, or the session was released), once it did."""

    def __str__(self) -> str:
        rank = self.link.worker.rank if self.link else None
        return f"DapSession[{self.id} rank={rank}]"

    # --- sending ----------------------------------------------------------------------------

    async def respond(
        self, request: dict, body: dict | None = None, error: str | None = None, show_user: bool = True
    ) -> None:
        await self.channel.respond(request, body, error, show_user=show_user)

    async def event(self, event: str, body: dict | None = None) -> None:
        await self.channel.event(event, body)

    async def output(self, text: str, category: str = "console") -> None:
        await self.event("output", {"category": category, "output": text.rstrip("\n") + "\n"})

    def forward_event(self, msg: dict) -> None:
        """An event from the worker's debugpy, for this session's client."""
        body = self.paths.map_message(dict(msg.get("body") or {}), to_remote=False)
        self._spawn(self.event(str(msg.get("event")), body))

    def _spawn(self, coro) -> None:
        t = asyncio.create_task(coro)
        self._tasks.add(t)
        t.add_done_callback(self._tasks.discard)

    # --- requests the broker answers itself -------------------------------------------------

    async def initialize_request(self, request: dict) -> bool:
        self.client_progress = bool((request.get("arguments") or {}).get("supportsProgressReporting"))
        await self.respond(request, CAPABILITIES)
        return True

    async def attach_request(self, request: dict) -> bool:
        args = request.get("arguments") or {}
        refused = admit_attach(args, self.door.token, self.door.tickets)  # a ticket, or the token
        if refused:
            await self.respond(request, error=refused)
            return True
        if self.link is not None:
            await self.respond(request, error="Ray Sleuth: this session is attached already.")
            return True
        if args.get("crash") is not None and await self._attach_crash(request, args):
            return True
        try:
            worker = resolve_target(self.door.table.workers(), args)
            mappings = list(args.get("pathMappings") or [])
            try:
                worker = await with_agent(self.door.table.workers, worker, self._progress)
                self.link = await self.door.leases.lease(worker, self, progress=self._progress)
            finally:
                await self._progress_end()
            if not mappings and isinstance(args.get("localRoot"), str):
                from raysleuth.broker.debug.pathmap import auto_mapping

                mappings = await auto_mapping(self.door.agents, worker, args["localRoot"])
                for m in mappings:
                    await self.output(f"Ray Sleuth: mapping {m['localRoot']} ↔ worker's {m['remoteRoot']}")
            self.paths = PathMapper(mappings)
        except SleuthError as exc:
            await self.respond(
                request, error=f"Ray Sleuth: {exc.message}" + (f" {exc.hint}" if exc.hint else "")
            )
            return True
        await self.respond(request)
        from raysleuth.broker.audit import audit_attach  # a line of the audit log (#37)

        await audit_attach(self.door, self.channel, worker)
        self.attached.set()
        await self.event("initialized")
        return True

    async def _attach_crash(self, request: dict, args: dict) -> bool:
        """attach {crash}: the live worker while it is held for this crash, else a replay.

        True when answered here; False to attach live to the held worker (args gets `worker`).
        """
        from raysleuth.broker.postmortem.replay import Replay

        crash_id = str(args["crash"])
        rec = self.door.crashes.get(crash_id)
        if rec is None:
            await self.respond(
                request,
                error=f"Ray Sleuth: no crash record {crash_id}. List them with `raysleuth crashes`.",
            )
            return True
        held = await held_worker(self.door.table.workers, crash_id, rec)
        if held is not None:
            args["worker"] = held.id
            return False
        live = any(w.id == rec.worker_id and w.state != "exited" for w in self.door.table.workers())
        self.replay = Replay(rec, worker_live=live)
        self.paths = PathMapper(list(args.get("pathMappings") or []))
        await self.respond(request)
        self.attached.set()
        await self.output(
            f"Ray Sleuth: crash {crash_id} ({self.replay.description()[:200]}) — "
            + ("the worker ran on after it; " if live else "the worker is gone; ")
            + "this is a read-only replay of the stored stack and locals."
        )
        await self.event("initialized")
        return True

    async def _replay_answer(self, request: dict) -> None:
        args = self.paths.map_message(dict(request.get("arguments") or {}), to_remote=True)
        replay = self.replay
        if replay is None:
            await self.respond(request, error="Ray Sleuth: no crash record is open in this session.")
            return
        try:
            body, error = replay.answer(str(request.get("command")), args)
        except (TypeError, ValueError) as exc:
            body, error = None, f"Ray Sleuth: bad arguments: {exc}"
        command = str(request.get("command"))
        if error is not None:
            quiet = command == "evaluate" and args.get("context") in QUIET_EVALUATE
            await self.respond(request, error=error, show_user=not quiet)
            return
        body = rayframes.tidy(command, self.paths.map_message(body or {}, to_remote=False))
        await self.respond(request, body)  # Ray's executor frames dimmed and cut, as live (issue 25)
        if command in RUN_COMMANDS:
            await self.output(
                f"Ray Sleuth: nothing runs in a replay of crash {replay.rec.id} ({replay.why}); "
                "the stack and locals stay as they were. Stop (Shift+F5) closes the replay."
            )
            await self.event("stopped", replay.stopped_event())

    async def _progress(self, text: str) -> None:
        """One step of a long attach: a progress notification where the client shows them,
        else a line in its console."""
        if not self.client_progress:
            await self.output(f"Ray Sleuth: {text}")
        elif self._progress_id is None:
            self._progress_id = f"raysleuth-attach-{self.id}"
            await self.event(
                "progressStart", {"progressId": self._progress_id, "title": "Ray Sleuth", "message": text}
            )
        else:
            await self.event("progressUpdate", {"progressId": self._progress_id, "message": text})

    async def _progress_end(self) -> None:
        await asyncio.sleep(0)  # steps already scheduled go out first
        if self._progress_id is not None:
            await self.event("progressEnd", {"progressId": self._progress_id})
            self._progress_id = None

    async def configurationDone_request(self, request: dict) -> bool:
        await self.respond(request)
        self.configured = True
        if self.replay is not None:
            await self.event("stopped", self.replay.stopped_event())
        if self.link is not None:
            # The worker may have stopped before this client came: say where, as debugpy won't.
            for tid, body in list(self.link.stopped.items()):
                await self.event(
                    "stopped",
                    {
                        "reason": body.get("reason", "pause"),
                        "threadId": tid,
                        "allThreadsStopped": body.get("allThreadsStopped", True),
                        "description": body.get("description"),
                    },
                )
        return True

    async def disconnect_request(self, request: dict) -> bool:
        await self.release()
        await self.respond(request)
        return False

    async def terminate_request(self, request: dict) -> bool:
        # Ending a session never ends the worker: the job goes on.
        await self.release()
        await self.respond(request)
        await self.event("terminated")
        return True

    # --- pass-through -----------------------------------------------------------------------

    async def forward(self, request: dict) -> None:
        command = str(request.get("command"))
        args = self.paths.map_message(dict(request.get("arguments") or {}), to_remote=True)
        kept = None
        link = self.link
        if link is None:
            await self._answer_ended(request, "this session is attached to no worker now.")
            return
        if command == "setBreakpoints":
            path = (args.get("source") or {}).get("path")
            if path:
                self.breakpoint_sources.add(path)
            args, kept = scope_breakpoints(args, link.worker)
        try:
            resp = await link.request(command, args)
        except LinkClosed as exc:
            await self._answer_ended(request, exc.message)
            return
        except SleuthError as exc:
            await self.respond(request, error=f"Ray Sleuth: {exc.message}")
            return
        except asyncio.TimeoutError:
            await self.respond(request, error=f"Ray Sleuth: the worker did not answer '{command}' in time.")
            return
        body = self.paths.map_message(resp.get("body") or {}, to_remote=False)
        if resp.get("success", False):
            body = rayframes.tidy(command, body)  # Ray's executor frames dimmed (issue #13)
        if kept is not None and resp.get("success", False):
            body = dict(body, breakpoints=merge_scoped(kept, body.get("breakpoints") or []))
        if resp.get("success", False):
            await self.respond(request, body)
        else:
            await self.respond(request, body, error=resp.get("message") or "failed")

    async def _answer_ended(self, request: dict, why: str) -> None:
        """A request that came as the worker went away: the session's end (a `terminated` event and
        its cause in the console) says so once; answers in flight must not add an error toast each."""
        if request.get("command") == "threads":
            await self.respond(request, {"threads": []})
        else:
            await self.respond(request, error=f"Ray Sleuth: {why}", show_user=False)

    async def release(self) -> None:
        """End this session's lease: its breakpoints go, a stopped worker runs on."""
        link, self.link = self.link, None
        if link is None:
            return
        self.ended = "the session was ended"
        await self.door.leases.release(link, self)

    async def link_closed(self, link: WorkerLink) -> None:
        """The worker's debugger went away (the worker exited or was killed)."""
        if link is not self.link:
            return
        self.link = None
        self.ended = "the worker's debugger went away"
        cause = await self.door.leases.describe_exit(link.worker_id)
        await self.output(f"Ray Sleuth: {link} ended: {cause}", category="important")
        await self.event("terminated")

    async def on_request(self, request: dict) -> bool:
        """One request from the client, in arrival order; False ends the session. The broker's
        own commands come from OWN_COMMANDS, never from a name looked up on this object (#37)."""
        command = request.get("command")
        name = repr(command)[:80]  # the client's text, cut
        own = OWN_COMMANDS.get(command) if isinstance(command, str) else None
        if not isinstance(request.get("arguments") or {}, dict):  # found by the fuzz tests (#16)
            await self.respond(request, error=f"Ray Sleuth: {name}'s arguments must be a JSON object.")
        elif own is not None:
            return await own(self, request)
        elif self.replay is not None:
            await self._replay_answer(request)
        elif self.link is None and self.ended is not None:
            await self._answer_ended(request, f"{name} came after the session ended: {self.ended}")
        elif self.link is None and command not in (DAP_REQUESTS if isinstance(command, str) else ()):
            await self.respond(request, error=f"Ray Sleuth: unknown command {name}.")
        elif self.link is None:
            await self.respond(
                request,
                error=(
                    f"Ray Sleuth: {name} needs an attached worker; send attach with "
                    "{token, worker} or {token, rank} first."
                ),
            )
        else:
            # Sent in order, answered as they come: a slow evaluate blocks nothing.
            self._spawn(self.forward(request))
            await asyncio.sleep(0)
        return True

    async def run(self) -> None:
        try:
            reason = await self.channel.run()
            log.info("%s ended: %s", self, reason)
        finally:
            await self.release()


OWN_COMMANDS: dict[str, Callable[[DapSession, dict], Awaitable[bool]]] = {
    "initialize": DapSession.initialize_request,
    "attach": DapSession.attach_request,
    "configurationDone": DapSession.configurationDone_request,
    "disconnect": DapSession.disconnect_request,
    "terminate": DapSession.terminate_request,
}
"""The requests the broker answers itself, by their DAP name; the others go to the worker."""
