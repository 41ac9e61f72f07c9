"""What the trigger, the hits and the debugger need of the agent (agent/core.py), and no more:
who this worker is, a way to send a record, to report at once, to re-arm, and its log. They
are typed against this, not against the Agent, so a test can hand them a small stand-in."""

from __future__ import annotations

import logging
from typing import Protocol


class AgentPort(Protocol):
    @property
    def log(self) -> logging.Logger:
        """The agent's logger (a file in Ray's session folder, never stdout)."""
        ...

    def identity(self) -> dict:
        """What a rank scope matches against: rank, node, actor class and name."""
        ...

    def poke(self) -> None:
        """Report now (a pause began or ended, the rank changed); never waits."""
        ...

    def emit(self, kind: str, payload: dict) -> None:
        """Send a logpoint line, a snapshot row or an event to the broker (fire and forget)."""
        ...

    def emit_row(self, payload: dict) -> None:
        """Send a divergence watch's row (batched: it leaves within a fraction of a second)."""
        ...

    def rearm_soon(self) -> None:
        """A point ruled itself out (rank known now, count reached): arm again soon."""
        ...
