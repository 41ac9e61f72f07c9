"""The one error family Ray Sleuth raises: each error carries a hint saying what to do next.

The HTTP API turns these into `{"error": ..., "hint": ...}` bodies; the CLI prints both.
"""

from __future__ import annotations


class SleuthError(Exception):
    """An error with a message (what failed, on what) and a hint (what to do next)."""

    status = 400
    """HTTP status the broker answers with when this error reaches a request handler."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def to_json(self) -> dict:
        return {"error": self.message, "hint": self.hint}


class BadRequest(SleuthError):
    status = 400


class Unauthorized(SleuthError):
    status = 401


class NotFound(SleuthError):
    status = 404


class BrokerUnreachable(SleuthError):
    status = 503
