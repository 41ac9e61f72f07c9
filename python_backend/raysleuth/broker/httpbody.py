"""A request's JSON body, bounded in size and time: 413 too large, 408 too slow, 400 not a JSON
object (the handlers of every route package read bodies through it)."""

from __future__ import annotations

import asyncio

from aiohttp import web

from raysleuth.shared.errors import BadRequest
from raysleuth.shared.limits import HTTP_BODY_TIMEOUT_S


class TooLarge(BadRequest):
    status = 413


class SlowBody(BadRequest):
    status = 408


async def body_of(request: web.Request) -> dict:
    declared = request.content_length
    if declared is not None and declared > request.app._client_max_size:
        raise TooLarge(
            f"The body is too large: {declared} bytes declared, at most {request.app._client_max_size}.",
            "Send less: a file's breakpoints, one expression.",
        )
    try:
        body = await asyncio.wait_for(request.json(), HTTP_BODY_TIMEOUT_S)
    except asyncio.TimeoutError:
        raise SlowBody(
            f"The body did not come within {HTTP_BODY_TIMEOUT_S:.0f} s.", "Send the whole body at once."
        ) from None
    except web.HTTPRequestEntityTooLarge as exc:  # found by the fuzz tests (#16): was "not JSON"
        raise TooLarge(
            f"The body is too large: {exc.text}",
            "Send less: a file's breakpoints, one expression.",
        ) from None
    except Exception:  # noqa: BLE001 - any unparsable body is the client's error
        raise BadRequest(
            "The body is not JSON.", "Send a JSON object with Content-Type: application/json."
        ) from None
    if not isinstance(body, dict):
        raise BadRequest("The body must be a JSON object.", 'Send {"...": ...}.')
    return body
