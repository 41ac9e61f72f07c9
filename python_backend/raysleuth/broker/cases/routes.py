"""`GET /v1/cases` (newest first), `GET /v1/cases/{id}` (with its evidence), and the divergence
watches: `POST /v1/watches`, `GET /v1/watches/{id}`, `DELETE /v1/watches/{id}`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from aiohttp import web

from raysleuth.broker.audit import client_of
from raysleuth.broker.httpbody import body_of

if TYPE_CHECKING:
    from raysleuth.broker.cases.book import CaseBook
    from raysleuth.broker.cases.watches import WatchService


class HasCases(Protocol):
    cases: CaseBook
    watches: WatchService


def add_routes(app: web.Application, svc: HasCases) -> None:
    async def get_cases(request: web.Request) -> web.Response:
        return web.json_response(svc.cases.listing())

    async def get_case(request: web.Request) -> web.Response:
        return web.json_response(svc.cases.get(request.match_info["id"]).to_json())

    async def post_watch(request: web.Request) -> web.Response:
        body = await body_of(request)
        return web.json_response(await svc.watches.create(body, await client_of(request)))

    async def get_watch(request: web.Request) -> web.Response:
        return web.json_response(svc.watches.get(request.match_info["id"]).to_json())

    async def delete_watch(request: web.Request) -> web.Response:
        await svc.watches.delete(request.match_info["id"])
        return web.json_response({"deleted": request.match_info["id"]})

    app.router.add_get("/v1/cases", get_cases)
    app.router.add_get("/v1/cases/{id}", get_case)
    app.router.add_post("/v1/watches", post_watch)
    app.router.add_get("/v1/watches/{id}", get_watch)
    app.router.add_delete("/v1/watches/{id}", delete_watch)
