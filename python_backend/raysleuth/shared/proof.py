"""The broker proves it holds the token before a client sends it (`GET /v1/hello?nonce=`): a
process that took a dead broker's port, or a planted `broker.json`'s address, gets no token.
Shared by the broker (answers) and every client (asks)."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets

HELLO_PATH = "/v1/hello"
"""The one route without a token."""

NONCE = re.compile(r"[0-9a-f]{32,128}")


def proof(token: str, nonce: str) -> str:
    """What only a holder of `token` can answer to `nonce` (HMAC-SHA256, hex)."""
    return hmac.new(token.encode(), b"raysleuth-broker-proof:" + nonce.encode(), hashlib.sha256).hexdigest()


def new_nonce() -> str:
    return secrets.token_hex(16)


def proven(token: str, nonce: str, answer) -> bool:
    """Whether `answer` (the broker's JSON) proves it holds `token`."""
    given = answer.get("proof") if isinstance(answer, dict) else None
    if not isinstance(given, str):
        return False
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), proof(token, nonce).encode())
