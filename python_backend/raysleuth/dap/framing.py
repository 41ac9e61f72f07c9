"""DAP wire framing: `Content-Length: N\\r\\n\\r\\n` followed by N bytes of JSON.

Async reader/writer helpers over asyncio streams; no protocol logic lives here.
"""

from __future__ import annotations

import asyncio
import json

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
"""Upper bound on one message; anything larger is a broken or hostile peer."""


class FramingError(Exception):
    """The peer sent bytes that are not a DAP message."""


def encode(message: dict) -> bytes:
    body = json.dumps(message, separators=(",", ":")).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def bound_reader(reader: asyncio.StreamReader, max_bytes: int, body_timeout: float | None = None) -> None:
    """Set the bounds `read_message` keeps on this reader: a larger Content-Length is refused, and
    a body may take `body_timeout` seconds after its header (unchanged when None)."""
    setattr(reader, "dap_max_bytes", max_bytes)  # noqa: B010 - an attribute of our own on the reader
    if body_timeout is not None:
        setattr(reader, "dap_body_timeout", body_timeout)  # noqa: B010


async def read_message(reader: asyncio.StreamReader) -> dict | None:
    """Read one message; None at a clean end of stream. A reader may carry its bounds
    (`bound_reader`)."""
    limit = getattr(reader, "dap_max_bytes", MAX_MESSAGE_BYTES)
    length = None
    while True:
        try:
            line = await reader.readline()
        except ValueError as exc:  # asyncio's limit on one line (64 KiB): no DAP header is that long
            raise FramingError(f"a header line over the reader's limit: {exc}") from None
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            if length is None:
                continue
            break
        name, _, value = line.decode("ascii", "replace").partition(":")
        if name.strip().lower() == "content-length":
            try:
                length = int(value.strip())
            except ValueError as exc:
                raise FramingError(f"bad Content-Length header: {line!r}") from exc
            if length < 0 or length > limit:
                raise FramingError(f"Content-Length {length} out of range (at most {limit} bytes)")
    timeout = getattr(reader, "dap_body_timeout", None)
    try:
        body = await asyncio.wait_for(reader.readexactly(length), timeout)
    except asyncio.TimeoutError:
        raise FramingError(f"the {length} bytes of a message did not come within {timeout} s") from None
    try:
        message = json.loads(body)
    except ValueError as exc:
        raise FramingError(f"message body is not JSON: {body[:80]!r}") from exc
    if not isinstance(message, dict):
        raise FramingError("message body is not a JSON object")
    return message


def seq_of(msg: dict, key: str = "seq") -> int | None:
    """A message's `seq` (or `request_seq`) when it is an integer, as DAP says; else None."""
    seq = msg.get(key, 0)
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else None


def response_to(request: dict, body: dict | None, error: str | None, show_user: bool = True) -> dict:
    """The response to `request`. With `error`: `success: false`, `message: error`, and `body`
    (if given, e.g. debugpy's own) or a DAP error body that shows the message to the user unless
    `show_user` is off (a failed hover is shown in place, not as a toast)."""
    msg: dict = {
        "type": "response",
        "request_seq": request.get("seq", 0),
        "command": request.get("command"),
        "success": error is None,
    }
    if error is not None:
        msg["message"] = error
        shown = {"error": {"id": 1, "format": error, "showUser": show_user}}
        msg["body"] = body if body is not None else shown
    elif body is not None:
        msg["body"] = body
    return msg
