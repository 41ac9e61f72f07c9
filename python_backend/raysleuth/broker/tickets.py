"""Attach tickets: a short-lived, single-use secret a DAP client puts in `attach` instead of the
broker's token (`POST /v1/tickets`, `raysleuth ticket`). A DAP client of another editor (nvim-dap,
dape) sends its secret to whatever listens on the port it was given; a process that squats a stale
DAP port then gets one ticket, spent or soon expired, bound to one target, never the token.

A ticket is valid for RAYSLEUTH_TICKET_TTL_S seconds (60), consumed by the first attach that
presents it (accepted or not), and at most MAX_TICKETS are outstanding (a new one drops the oldest).
The broker keeps only each ticket's SHA-256, so a lookup's timing says nothing about a ticket.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from raysleuth.broker.auth import check_bearer
from raysleuth.shared.errors import BadRequest

TTL_ENV = "RAYSLEUTH_TICKET_TTL_S"
DEFAULT_TTL_S = 60.0
MAX_TICKETS = 256
"""Outstanding tickets; one more drops the oldest."""
MAX_ID_CHARS = 128
"""Longest worker or crash id a ticket may name."""
TARGET_KEYS = ("worker", "rank", "job", "crash")

GONE = (
    "Ray Sleuth: attach refused, the attach ticket is unknown, used or expired: get a new one "
    "with `raysleuth ticket`."
)
NO_SECRET = (
    "Ray Sleuth: attach refused, the token is missing or wrong. Put a ticket from `raysleuth ticket` "
    "in `ticket`, or the token in the file `token` of the broker's state dir (readable by its user "
    "only) in `token`."
)
TARGET_HINT = 'Send {}, {"worker": ID}, {"rank": N, "job"?: J} or {"crash": ID}.'


def ttl_setting() -> float:
    """RAYSLEUTH_TICKET_TTL_S when it is a positive number, else 60."""
    try:
        value = float(os.environ.get(TTL_ENV, DEFAULT_TTL_S))
    except ValueError:
        return DEFAULT_TTL_S
    return value if 0 < value < float("inf") else DEFAULT_TTL_S


def parse_target(body: dict) -> dict:
    """The target a ticket is bound to, from a `POST /v1/tickets` body: {} (any), {worker},
    {rank, job?} or {crash}. BadRequest for anything else."""
    unknown = sorted(set(body) - set(TARGET_KEYS))
    if unknown:
        raise BadRequest(
            f"Unknown field(s) for a ticket: {', '.join(map(repr, unknown))[:200]}.", TARGET_HINT
        )
    named = [k for k in ("worker", "rank", "crash") if k in body]
    if len(named) > 1:
        raise BadRequest(f"A ticket names one target, not {' and '.join(named)}.", TARGET_HINT)
    if "job" in body and named != ["rank"]:
        raise BadRequest('"job" goes with "rank" only.', TARGET_HINT)
    target: dict = {}
    for key in ("worker", "crash", "job"):
        if key in body:
            value = body[key]
            if not isinstance(value, str) or not value or len(value) > MAX_ID_CHARS:
                raise BadRequest(f'"{key}" must be an id: 1 to {MAX_ID_CHARS} characters.', TARGET_HINT)
            target[key] = value
    if "rank" in body:
        rank = body["rank"]
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < 1 << 31:
            raise BadRequest(f'"rank" must be a non-negative integer, not {str(rank)[:40]!r}.', TARGET_HINT)
        target["rank"] = rank
    return target


def _describe(target: dict) -> str:
    return ", ".join(f"{k} {target[k]}" for k in TARGET_KEYS if k in target) or "no target"


def _digest(ticket: str) -> bytes:
    return hashlib.sha256(ticket.encode("utf-8", "surrogatepass")).digest()


@dataclass(frozen=True)
class _Entry:
    expires: float
    target: dict


class TicketStore:
    """Outstanding tickets. `clock` (monotonic seconds) is injectable for the tests."""

    def __init__(
        self,
        ttl_s: float | None = None,
        most: int = MAX_TICKETS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl_s = ttl_setting() if ttl_s is None else ttl_s
        self.most = most
        self.clock = clock
        self._tickets: OrderedDict[bytes, _Entry] = OrderedDict()

    def __len__(self) -> int:
        self._drop_expired()
        return len(self._tickets)

    def issue(self, body: dict) -> dict:
        """A new ticket for the target `body` names: the answer of `POST /v1/tickets`."""
        target = parse_target(body)
        self._drop_expired()
        while len(self._tickets) >= self.most:
            self._tickets.popitem(last=False)
        ticket = secrets.token_hex(32)
        self._tickets[_digest(ticket)] = _Entry(self.clock() + self.ttl_s, target)
        ttl = int(self.ttl_s) if float(self.ttl_s).is_integer() else self.ttl_s
        return {"ticket": ticket, "expires_in": ttl, "single_use": True}

    def redeem(self, ticket: object) -> dict | None:
        """The target the ticket is bound to ({} for any), None when it is unknown, used or
        expired. Either way the ticket is spent."""
        if not isinstance(ticket, str) or len(ticket) > 256:
            return None
        entry = self._tickets.pop(_digest(ticket), None)
        if entry is None or self.clock() >= entry.expires:
            return None
        return entry.target

    def _drop_expired(self) -> None:
        now = self.clock()
        while self._tickets:
            first = next(iter(self._tickets.values()))
            if now < first.expires:  # issued in order with one TTL: the rest are younger
                break
            self._tickets.popitem(last=False)


def admit_attach(args: dict, token: str, tickets: TicketStore) -> str | None:
    """Whether DAP `attach` arguments may attach: None when they may (a bound ticket's target is
    filled into `args` when they name none), else the refusal to answer with. A `ticket` is
    spent here whatever follows; a `token` still works (older clients)."""
    if not isinstance(args, dict):
        return "Ray Sleuth: attach refused, its arguments must be a JSON object."
    if "ticket" in args:
        bound = tickets.redeem(args.get("ticket"))
        if bound is None:
            return GONE
        if not bound:
            return None
        asked = {k: args[k] for k in TARGET_KEYS if args.get(k) is not None}
        if isinstance(asked.get("rank"), str) and asked["rank"].isascii() and asked["rank"].isdecimal():
            asked["rank"] = int(asked["rank"])  # as the attach itself reads it
        if not asked:
            args.update(bound)
            return None
        if asked != bound:
            return (
                f"Ray Sleuth: attach refused, this ticket is for {_describe(bound)}, not "
                f"{_describe(asked)[:200]}: get one for that target with `raysleuth ticket`."
            )
        return None
    given = args.get("token")
    if not isinstance(given, str) or not check_bearer(f"Bearer {given}", token):
        return NO_SECRET
    return None
