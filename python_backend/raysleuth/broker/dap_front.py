"""The broker's DAP front door: one TCP port for every debug session.

The broker answers `initialize` itself and checks the attach token. Leasing worker connections
through node relays is the attach capability's work (issue #3); until it lands, a valid attach
fails with a message that says so, rather than hanging.
"""

from __future__ import annotations

import asyncio
import logging

from raysleuth.broker.auth import check_bearer
from raysleuth.dap.framing import FramingError, encode, read_message

log = logging.getLogger(__name__)

CAPABILITIES = {
    "supportsConfigurationDoneRequest": True,
    "supportsConditionalBreakpoints": True,
    "supportsHitConditionalBreakpoints": True,
    "supportsLogPoints": True,
    "supportsEvaluateForHovers": True,
    "supportTerminateDebuggee": False,
}


class DapSession:
    _next_id = 0

    def __init__(self, broker, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        DapSession._next_id += 1
        self.id = DapSession._next_id
        self.broker = broker
        self.reader = reader
        self.writer = writer
        self.seq = 0

    def __str__(self) -> str:
        return f"DapSession[{self.id}]"

    async def send(self, message: dict) -> None:
        self.seq += 1
        message["seq"] = self.seq
        self.writer.write(encode(message))
        await self.writer.drain()

    async def respond(self, request: dict, body: dict | None = None, error: str | None = None) -> None:
        msg = {"type": "response", "request_seq": request.get("seq", 0),
               "command": request.get("command"), "success": error is None}
        if error is not None:
            msg["message"] = error
            msg["body"] = {"error": {"id": 1, "format": error, "showUser": True}}
        elif body is not None:
            msg["body"] = body
        await self.send(msg)

    async def initialize_request(self, request: dict) -> bool:
        await self.respond(request, CAPABILITIES)
        return True

    async def attach_request(self, request: dict) -> bool:
        args = request.get("arguments") or {}
        token = args.get("token")
        if not isinstance(token, str) or not check_bearer(f"Bearer {token}", self.broker.token):
            await self.respond(request, error=(
                "Ray Sleuth: attach refused, the token is missing or wrong. Use the token in "
                f"{self.broker.token_file} (the extension reads it from broker.json)."))
            return True
        await self.respond(request, error=(
            "Ray Sleuth: this broker lists workers but cannot attach to them yet "
            "(the attach capability is tracked in issue #3)."))
        return True

    async def disconnect_request(self, request: dict) -> bool:
        await self.respond(request)
        return False

    async def run(self) -> None:
        while True:
            try:
                request = await read_message(self.reader)
            except (FramingError, asyncio.IncompleteReadError) as exc:
                log.info("%s: bad input (%s); closing", self, exc)
                return
            if request is None:
                return
            if request.get("type") != "request":
                continue
            handler = getattr(self, f"{request.get('command')}_request", None)
            if handler is None:
                await self.respond(request, error=(
                    f"Ray Sleuth: '{request.get('command')}' needs an attached worker; "
                    "send attach with {token, worker} or {token, rank} first."))
                continue
            if not await handler(request):
                return


class DapFrontDoor:
    def __init__(self, broker) -> None:
        self.broker = broker

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        session = DapSession(self.broker, reader, writer)
        try:
            await session.run()
        except (ConnectionError, asyncio.CancelledError):
            pass
        except Exception:  # noqa: BLE001 - one session's failure must not end the broker
            log.exception("%s failed", session)
        finally:
            writer.close()
