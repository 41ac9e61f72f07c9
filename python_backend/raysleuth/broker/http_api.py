"""The broker's HTTP API (JSON, bearer token) and its server-sent-event stream.

Handlers only translate between HTTP and the broker's services (`Services`); bad input gets a
4xx JSON error with a hint and never takes the broker down.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from aiohttp import web

from raysleuth.broker.audit import READ_MAX, client_of
from raysleuth.broker.auth import check_bearer
from raysleuth.broker.cases.routes import add_routes as add_case_routes
from raysleuth.broker.events import format_sse
from raysleuth.broker.groups.routes import add_routes as add_group_routes
from raysleuth.broker.httpbody import body_of
from raysleuth.broker.points.inspect import flag_snapshot_rows, rtol_of
from raysleuth.broker.radar.stacks import StacksQuery
from raysleuth.model.point import parse_owner
from raysleuth.model.stacks import collectives_queue
from raysleuth.shared.errors import BadRequest, NotFound, SleuthError
from raysleuth.shared.limits import SSE_WRITE_TIMEOUT_S
from raysleuth.shared.proof import HELLO_PATH, NONCE, proof

if TYPE_CHECKING:
    from raysleuth.broker.audit import AuditLog
    from raysleuth.broker.cases.book import CaseBook
    from raysleuth.broker.cases.watches import WatchService
    from raysleuth.broker.debug.allstop import AllStop
    from raysleuth.broker.events import EventHub
    from raysleuth.broker.groups.book import GroupBook
    from raysleuth.broker.points.inspect import Inspections
    from raysleuth.broker.points.service import PointService
    from raysleuth.broker.postmortem.crashes import CrashStore
    from raysleuth.broker.postmortem.rerun import Reruns
    from raysleuth.broker.radar.doctor import Doctor
    from raysleuth.broker.radar.stacks import StacksService
    from raysleuth.broker.telemetry.gpu import GpuHistory
    from raysleuth.broker.telemetry.timeline import Timeline
    from raysleuth.broker.tickets import TicketStore
    from raysleuth.broker.workers.control import Control
    from raysleuth.broker.workers.logs import WorkerLogs
    from raysleuth.broker.workers.table import WorkerTable

log = logging.getLogger(__name__)

KEEPALIVE_S = 15.0
"""Seconds between comment lines on an idle stream, so proxies and clients keep it open."""


def _error(status: int, message: str, hint: str | None) -> web.Response:
    return web.json_response({"error": message, "hint": hint}, status=status)


@dataclass(kw_only=True)
class Services:
    """What the HTTP layer reads: the broker's services, built by `broker/app.py` (tests pass
    fakes for the ones they use and None for the rest)."""

    token: str
    token_file: Path | str
    hub: EventHub
    table: WorkerTable
    status: Callable[[], dict]
    points: PointService
    timeline: Timeline
    #: Events and logpoint lines.
    crashes: CrashStore
    gpu: GpuHistory
    control: Control
    #: Evaluate, continue, pause.
    doctor: Doctor
    stacks: StacksService
    #: The hang radar and its watch mode.
    worker_logs: WorkerLogs
    #: A worker's stdout/stderr through its node's relay.
    settings: AllStop
    #: The broker's settings (all-stop per job).
    inspections: Inspections
    #: raysleuth.inspect() rows of every rank, flagged.
    cases: CaseBook
    #: Every failure as a case (issue 26).
    watches: WatchService
    #: First-divergence watches (issue 26).
    groups: GroupBook
    #: Rank groups (issue 27).
    reruns: Reruns
    #: Failed tasks run again under the debugger (issue 26).
    audit: AuditLog | None = None
    #: Every action that runs code in a worker, with who asked (issue 37).
    tickets: TicketStore
    #: Single-use attach tickets for DAP clients (issue 37), shared with the DAP front door.


def make_app(svc: Services) -> web.Application:
    @web.middleware
    async def errors_and_auth(request: web.Request, handler):
        if request.path == HELLO_PATH and request.method == "GET":
            return hello(request)
        if not check_bearer(request.headers.get("Authorization"), svc.token):
            return _error(
                401,
                "Missing or wrong token.",
                "Send 'Authorization: Bearer <token>' with the token in the file `token` of the "
                "broker's state dir (readable by its user only), or set RAYSLEUTH_TOKEN for the CLI.",
            )
        try:
            return await handler(request)
        except SleuthError as exc:
            return _error(exc.status, exc.message, exc.hint)
        except web.HTTPNotFound:
            return _error(
                404,
                f"No such endpoint: {request.method} {request.path}",
                "The routes are in docs/contract.md: /v1/workers, /v1/nodes, /v1/stream, ...",
            )
        except web.HTTPMethodNotAllowed as exc:
            return _error(
                405,
                f"{request.method} is not allowed on {request.path}",
                f"Use one of: {', '.join(sorted(exc.allowed_methods))}",
            )
        except (web.HTTPException, asyncio.CancelledError):
            raise
        except ConnectionResetError as exc:
            # The client left mid-request: nobody reads an answer, and aiohttp would log the
            # exception as an ERROR "Error handling request".
            log.debug("%s %s: the client left: %r", request.method, request.path, exc)
            return web.Response(status=499)
        except Exception as exc:  # noqa: BLE001 - a handler bug must not end the broker
            log.exception("request %s %s failed", request.method, request.path)
            return _error(
                500,
                f"Internal error: {type(exc).__name__}: {exc}",
                "This is a Ray Sleuth bug; the broker's log has the traceback.",
            )

    def hello(request: web.Request) -> web.Response:
        """No token needed: the broker proves it holds the token (HMAC of the client's nonce), so
        that a client never sends the token to a process that took a dead broker's port."""
        nonce = request.query.get("nonce", "")
        if not NONCE.fullmatch(nonce):
            return _error(400, "nonce must be 32 to 128 hex digits.", "GET /v1/hello?nonce=<random hex>.")
        return web.json_response({"broker": "raysleuth", "proof": proof(svc.token, nonce)})

    async def get_workers(request: web.Request) -> web.Response:
        return web.json_response(svc.table.workers_json())

    async def get_worker(request: web.Request) -> web.Response:
        wid = request.match_info["id"]
        w = svc.table.get(wid)
        if w is not None:
            return web.json_response(w.to_json())
        raise NotFound(f"No worker with id {wid}.", "List workers with GET /v1/workers or `raysleuth list`.")

    async def get_worker_logs(request: web.Request) -> web.Response:
        q = request.query
        try:
            offset, max_bytes = int(q.get("offset", -65536)), int(q.get("max", 256 * 1024))
        except ValueError:
            raise BadRequest("offset and max must be integers", "E.g. ?stream=err&offset=-65536.") from None
        res = await svc.worker_logs.read(request.match_info["id"], q.get("stream", "out"), offset, max_bytes)
        return web.json_response(res)

    async def get_settings(request: web.Request) -> web.Response:
        return web.json_response(svc.settings.settings())

    async def put_settings(request: web.Request) -> web.Response:
        return web.json_response(svc.settings.put_settings(await body_of(request)))

    async def get_nodes(request: web.Request) -> web.Response:
        return web.json_response(svc.table.nodes())

    async def get_status(request: web.Request) -> web.Response:
        return web.json_response(svc.status())

    async def stream(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-cache",
                "X-Accel-Buffering": "no",
            }
        )
        queue = svc.hub.subscribe()
        try:
            await resp.prepare(request)
            await resp.write(format_sse("workers", svc.table.workers_json()))
            quiet = 0.0
            while True:
                try:
                    frame = await asyncio.wait_for(queue.get(), 1.0)
                    quiet = 0.0
                except asyncio.TimeoutError:
                    # A client that went away stops counting as a watcher within a second
                    # (the post-mortem hold depends on who watches).
                    if request.transport is None or request.transport.is_closing():
                        break
                    quiet += 1.0
                    if quiet < KEEPALIVE_S:
                        continue
                    quiet, frame = 0.0, b": keepalive\n\n"
                if frame is None:  # the broker stops, or this client fell behind (a last event said so)
                    break
                try:
                    await asyncio.wait_for(resp.write(frame), SSE_WRITE_TIMEOUT_S)
                except asyncio.TimeoutError:
                    log.info("a stream client took no event for %.0f s: dropped", SSE_WRITE_TIMEOUT_S)
                    if request.transport is not None:
                        request.transport.abort()  # what it did not read is freed with it
                    break
        except (ConnectionResetError, asyncio.CancelledError) as exc:
            log.debug("a stream client left: %r", exc)
        finally:
            svc.hub.unsubscribe(queue)
        return resp

    def who(request: web.Request) -> str:
        return request.headers.get("User-Agent", "")[:60]

    async def get_breakpoints(request: web.Request) -> web.Response:
        return web.json_response(svc.points.breakpoint_listing())

    async def put_breakpoints(request: web.Request) -> web.Response:
        body = await body_of(request)
        return web.json_response(await svc.points.put_file(body, who(request), await client_of(request)))

    async def delete_breakpoints(request: web.Request) -> web.Response:
        owner = request.query.get("owner")
        owner = parse_owner(owner) if owner is not None else None
        gone = await svc.points.clear(owner, who(request))
        return web.json_response({"ok": True, "deleted": gone})

    async def post_evaluate(request: web.Request) -> web.Response:
        body = await body_of(request)
        return web.json_response(await svc.control.evaluate(body, await client_of(request)))

    async def post_kill_worker(request: web.Request) -> web.Response:
        wid = request.match_info["id"]
        return web.json_response(await svc.control.end_worker(wid, await client_of(request)))

    async def get_audit(request: web.Request) -> web.Response:
        try:
            limit = int(request.query.get("limit", 100))
        except ValueError:
            raise BadRequest("'limit' must be an integer", "E.g. ?limit=100.") from None
        if not 1 <= limit <= READ_MAX:
            raise BadRequest(f"'limit' must be 1 to {READ_MAX}, not {limit}", "E.g. ?limit=100.")
        return web.json_response(svc.audit.tail(limit) if svc.audit is not None else [])

    async def post_continue(request: web.Request) -> web.Response:
        return web.json_response(await svc.control.continue_paused(await body_of(request)))

    async def post_pause(request: web.Request) -> web.Response:
        return web.json_response(await svc.control.pause(await body_of(request)))

    async def post_snapshot(request: web.Request) -> web.Response:
        body = await body_of(request)
        snap = await svc.points.add_snapshot(body, await client_of(request))
        return web.json_response({"id": snap.id})

    async def get_snapshots(request: web.Request) -> web.Response:
        return web.json_response(svc.points.snapshot_listing())

    async def get_snapshot(request: web.Request) -> web.Response:
        rows = svc.points.points.snapshot_rows(request.match_info["id"])
        return web.json_response(flag_snapshot_rows(rows, rtol_of(request.query)))

    async def get_inspect(request: web.Request) -> web.Response:
        q = request.query
        rows = svc.inspections.query(q.get("name") or None, q.get("step") or None, rtol_of(q))
        return web.json_response(rows)

    async def delete_snapshot(request: web.Request) -> web.Response:
        await svc.points.remove_snapshot(request.match_info["id"])
        return web.json_response({"ok": True})

    def since_of(request: web.Request) -> int:
        try:
            return int(request.query.get("since", "0"))
        except ValueError:
            raise BadRequest("'since' must be an integer", "Pass the last seq you saw: ?since=42.") from None

    async def get_logs(request: web.Request) -> web.Response:
        return web.json_response(svc.timeline.logs_since(since_of(request)))

    async def get_events(request: web.Request) -> web.Response:
        return web.json_response(svc.timeline.events_since(since_of(request), request.query.get("name")))

    async def get_doctor(request: web.Request) -> web.Response:
        return web.json_response(await svc.doctor.report())

    async def get_gpu(request: web.Request) -> web.Response:
        return web.json_response(svc.gpu.rows())

    async def get_crashes(request: web.Request) -> web.Response:
        return web.json_response(svc.crashes.summaries())

    async def get_crash(request: web.Request) -> web.Response:
        rec = svc.crashes.get(request.match_info["id"])
        if rec is None:
            raise NotFound(
                f"No crash record {request.match_info['id']}.",
                "List them: GET /v1/crashes or `raysleuth crashes`.",
            )
        return web.json_response(rec.to_json())

    async def post_rerun(request: web.Request) -> web.Response:
        return web.json_response(await svc.reruns.start(request.match_info["id"]))

    async def get_stacks(request: web.Request) -> web.Response:
        return web.json_response(await svc.stacks.take(StacksQuery.from_params(request.query)))

    async def get_collectives(request: web.Request) -> web.Response:
        job = request.query.get("job") or None
        taken = await svc.stacks.take(StacksQuery(job=job))
        return web.json_response(collectives_queue(taken["collectives"], taken["workers"], taken["behind"]))

    async def post_ticket(request: web.Request) -> web.Response:
        body = await body_of(request) if request.body_exists else {}
        return web.json_response(svc.tickets.issue(body))

    async def get_stacks_watch(request: web.Request) -> web.Response:
        return web.json_response(svc.stacks.status())

    async def put_stacks_watch(request: web.Request) -> web.Response:
        body = await body_of(request)
        return web.json_response(await svc.stacks.start(body.get("interval", 10.0), body.get("samples", 3)))

    async def delete_stacks_watch(request: web.Request) -> web.Response:
        return web.json_response(await svc.stacks.stop())

    app = web.Application(middlewares=[errors_and_auth])
    app.router.add_get("/v1/stacks", get_stacks)
    app.router.add_get("/v1/stacks/watch", get_stacks_watch)
    app.router.add_get("/v1/collectives", get_collectives)
    app.router.add_put("/v1/stacks/watch", put_stacks_watch)
    app.router.add_delete("/v1/stacks/watch", delete_stacks_watch)
    app.router.add_get("/v1/gpu", get_gpu)
    app.router.add_get("/v1/inspect", get_inspect)
    app.router.add_get("/v1/doctor", get_doctor)
    app.router.add_get("/v1/events", get_events)
    app.router.add_get("/v1/crashes", get_crashes)
    app.router.add_get("/v1/crashes/{id}", get_crash)
    app.router.add_post("/v1/crashes/{id}/rerun", post_rerun)
    app.router.add_get("/v1/breakpoints", get_breakpoints)
    app.router.add_put("/v1/breakpoints", put_breakpoints)
    app.router.add_delete("/v1/breakpoints", delete_breakpoints)
    app.router.add_post("/v1/evaluate", post_evaluate)
    app.router.add_post("/v1/continue", post_continue)
    app.router.add_post("/v1/pause", post_pause)
    app.router.add_post("/v1/snapshots", post_snapshot)
    app.router.add_get("/v1/snapshots", get_snapshots)
    app.router.add_get("/v1/snapshots/{id}", get_snapshot)
    app.router.add_delete("/v1/snapshots/{id}", delete_snapshot)
    app.router.add_get("/v1/logs", get_logs)
    app.router.add_get("/v1/workers", get_workers)
    app.router.add_get("/v1/workers/{id}", get_worker)
    app.router.add_get("/v1/workers/{id}/logs", get_worker_logs)
    app.router.add_post("/v1/workers/{id}/kill", post_kill_worker)
    app.router.add_get("/v1/audit", get_audit)
    app.router.add_get("/v1/settings", get_settings)
    app.router.add_put("/v1/settings", put_settings)
    app.router.add_get("/v1/nodes", get_nodes)
    app.router.add_get("/v1/status", get_status)
    app.router.add_get("/v1/stream", stream)
    app.router.add_post("/v1/tickets", post_ticket)
    add_case_routes(app, svc)
    add_group_routes(app, svc)
    return app
