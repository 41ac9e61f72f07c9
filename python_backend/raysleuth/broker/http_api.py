"""The broker's HTTP API (JSON, bearer token) and its server-sent-event stream.

Handlers only translate between HTTP and the broker; bad input gets a 4xx JSON error with a
hint and never takes the broker down.
"""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web

from raysleuth.broker.auth import check_bearer
from raysleuth.broker.events import format_sse
from raysleuth.errors import NotFound, SleuthError

log = logging.getLogger(__name__)

KEEPALIVE_S = 15.0
"""Seconds between comment lines on an idle stream, so proxies and clients keep it open."""


def _error(status: int, message: str, hint: str | None) -> web.Response:
    return web.json_response({"error": message, "hint": hint}, status=status)


def make_app(broker) -> web.Application:
    @web.middleware
    async def errors_and_auth(request: web.Request, handler):
        if not check_bearer(request.headers.get("Authorization"), broker.token):
            return _error(
                401,
                "Missing or wrong token.",
                f"Send 'Authorization: Bearer <token>'; the broker's token is in {broker.token_file}"
                " (or set RAYSLEUTH_TOKEN for the CLI).",
            )
        try:
            return await handler(request)
        except SleuthError as exc:
            return _error(exc.status, exc.message, exc.hint)
        except web.HTTPNotFound:
            return _error(
                404,
                f"No such endpoint: {request.method} {request.path}",
                "See the HTTP API in the README: /v1/workers, /v1/nodes, /v1/stream, ...",
            )
        except web.HTTPMethodNotAllowed as exc:
            return _error(
                405,
                f"{request.method} is not allowed on {request.path}",
                f"Use one of: {', '.join(sorted(exc.allowed_methods))}",
            )
        except (web.HTTPException, asyncio.CancelledError, ConnectionResetError):
            raise
        except Exception as exc:  # noqa: BLE001 - a handler bug must not end the broker
            log.exception("request %s %s failed", request.method, request.path)
            return _error(
                500,
                f"Internal error: {type(exc).__name__}: {exc}",
                "This is a Ray Sleuth bug; the broker's log has the traceback.",
            )

    async def get_workers(request: web.Request) -> web.Response:
        return web.json_response(broker.workers())

    async def get_worker(request: web.Request) -> web.Response:
        wid = request.match_info["id"]
        for w in broker.workers():
            if w["id"] == wid:
                return web.json_response(w)
        raise NotFound(f"No worker with id {wid}.", "List workers with GET /v1/workers or `raysleuth list`.")

    async def get_nodes(request: web.Request) -> web.Response:
        return web.json_response(broker.nodes())

    async def get_status(request: web.Request) -> web.Response:
        return web.json_response(broker.status())

    async def stream(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-cache",
                "X-Accel-Buffering": "no",
            }
        )
        await resp.prepare(request)
        queue = broker.hub.subscribe()
        try:
            await resp.write(format_sse("workers", broker.workers()))
            while True:
                try:
                    frame = await asyncio.wait_for(queue.get(), KEEPALIVE_S)
                except asyncio.TimeoutError:
                    frame = b": keepalive\n\n"
                await resp.write(frame)
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            broker.hub.unsubscribe(queue)
        return resp

    app = web.Application(middlewares=[errors_and_auth])
    app.router.add_get("/v1/workers", get_workers)
    app.router.add_get("/v1/workers/{id}", get_worker)
    app.router.add_get("/v1/nodes", get_nodes)
    app.router.add_get("/v1/status", get_status)
    app.router.add_get("/v1/stream", stream)
    return app
