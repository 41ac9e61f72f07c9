"""`GET /v1/groups`, `PUT /v1/groups/{name}`, `DELETE /v1/groups/{name}`, and `POST /v1/step`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from aiohttp import web

from raysleuth.broker.httpbody import body_of

if TYPE_CHECKING:
    from raysleuth.broker.groups.book import GroupBook
    from raysleuth.broker.points.service import PointService
    from raysleuth.broker.workers.control import Control


class HasGroups(Protocol):
    groups: GroupBook
    control: Control
    points: PointService


def add_routes(app: web.Application, svc: HasGroups) -> None:
    async def get_groups(request: web.Request) -> web.Response:
        return web.json_response(svc.groups.all())

    async def put_group(request: web.Request) -> web.Response:
        listed = svc.groups.put(request.match_info["name"], await body_of(request))
        if svc.points.points.uses_groups():
            await svc.points.push()  # `[group NAME]` scopes take the new definition
        return web.json_response(listed)

    async def delete_group(request: web.Request) -> web.Response:
        svc.groups.delete(request.match_info["name"])
        if svc.points.points.uses_groups():
            await svc.points.push()
        return web.json_response({"deleted": request.match_info["name"]})

    async def post_step(request: web.Request) -> web.Response:
        return web.json_response(await svc.control.step(await body_of(request)))

    app.router.add_get("/v1/groups", get_groups)
    app.router.add_put("/v1/groups/{name}", put_group)
    app.router.add_delete("/v1/groups/{name}", delete_group)
    app.router.add_post("/v1/step", post_step)
