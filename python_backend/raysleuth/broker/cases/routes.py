"""`GET /v1/cases` (newest first) and `GET /v1/cases/{id}` (with its evidence)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from aiohttp import web

if TYPE_CHECKING:
    from raysleuth.broker.cases.book import CaseBook


class HasCases(Protocol):
    cases: CaseBook


def add_routes(app: web.Application, svc: HasCases) -> None:
    async def get_cases(request: web.Request) -> web.Response:
        return web.json_response(svc.cases.listing())

    async def get_case(request: web.Request) -> web.Response:
        return web.json_response(svc.cases.get(request.match_info["id"]).to_json())

    app.router.add_get("/v1/cases", get_cases)
    app.router.add_get("/v1/cases/{id}", get_case)
