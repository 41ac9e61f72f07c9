"""What happens when an armed line runs: scope, condition, hit count, then a logpoint line, a
snapshot or a stop in debugpy.

Runs in user threads, inside the user's code: never raises into it, never prints, and does as
little as it can per pass (a false condition costs one `eval`).
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from raysleuth.agent import debugger
from raysleuth.agent.capture import bounded_repr, capture_frames
from raysleuth.agent.points import ArmedPoint
from raysleuth.model.tensors import nothing_to_summarize, summarize
from raysleuth.shared.limits import EXPRESSION_BUDGET_S, MAX_LOG_LINE_CHARS

if TYPE_CHECKING:
    from raysleuth.agent.port import AgentPort

clock = time.monotonic
"""The logpoint rate's clock (a seam for the tests)."""

LOG_RATE = 50
"""Logpoint lines per point per second; more are counted and reported as dropped."""


def format_log(message: str, frame) -> str:
    """Interpolate `{expression}` parts of a logpoint message in the frame (`{{` is a brace)."""
    out: list[str] = []
    i, n = 0, len(message)
    while i < n:
        c = message[i]
        if c == "{" and message.startswith("{{", i):
            out.append("{")
            i += 2
        elif c == "}" and message.startswith("}}", i):
            out.append("}")
            i += 2
        elif c == "{":
            j = message.find("}", i + 1)
            if j < 0:
                out.append(message[i:])
                break
            expr = message[i + 1 : j]
            try:
                value = eval(expr, frame.f_globals, frame.f_locals)  # noqa: S307 - the user's own logpoint
                s = value if isinstance(value, str) else bounded_repr(value)
            except Exception as exc:  # noqa: BLE001 - the user's expression failed: that is the text
                s = f"<{type(exc).__name__}: {exc}>"
            out.append(s[:1000])
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def expression_values(exprs: list, frame, extremes: bool = True) -> list[dict]:
    """A snapshot's expressions in the frame: summary rows for tensors, arrays, numbers and
    collections of them (`expression`, `name`, statistics), else {expression, name, value} with
    a short repr, or {expression, name, error} when the expression raised. A watch's rows leave
    out min and max (`extremes`): it compares by hash, norm and mean at every pass."""
    out: list[dict] = []
    for expr, code in exprs:
        try:
            value = eval(code, frame.f_globals, frame.f_locals)  # noqa: S307 - the user's own expression
        except Exception as exc:  # noqa: BLE001 - the user's expression failed: that is the answer
            out.append({"expression": expr, "name": expr, "error": f"{type(exc).__name__}: {exc}"[:500]})
            continue
        rows = summarize(expr, value, extremes=extremes)
        if nothing_to_summarize(rows):
            rows = [{"name": expr, "value": bounded_repr(value)}]
        out.extend(dict(r, expression=expr) for r in rows)
    return out


def step_value(frame, name: str):
    """A watch's step local in the frame: an int where it is one, else its short repr, None if absent."""
    value = frame.f_locals.get(name)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    try:
        return (
            int(value.item()) if hasattr(value, "item") else (None if value is None else bounded_repr(value))
        )
    except Exception:  # noqa: BLE001 - a local that will not say its number: its repr
        return bounded_repr(value)


class Hits:
    """Decides, per pass of an armed line, whether and how each point there fires.

    `agent` is the seam to the rest of the worker: `identity()` (for scopes), `emit(kind,
    payload)` (logpoint lines, snapshots), `rearm_soon()` (a point ruled itself out), `poke()`
    and `log` (for a stop).
    """

    def __init__(self, agent: AgentPort) -> None:
        self.agent = agent
        self._local = threading.local()
        """`busy` while this thread is in a hit: a condition or repr that runs armed code does
        not fire again."""

    def hit(self, frame, pts: list[ArmedPoint]) -> None:
        local = self._local
        if getattr(local, "busy", False):
            return
        local.busy = True
        try:
            for p in list(pts):
                if not p.dead:
                    self._fire(p, frame)
        finally:
            local.busy = False

    def _fire(self, p: ArmedPoint, frame) -> None:
        agent = self.agent
        if not p.scope.is_all():
            m = p.scope.match(agent.identity())
            if m is False:
                p.dead = True  # its rank rules it out now: disarmed at the next heartbeat
                agent.rearm_soon()
                return
            if m is None:
                return  # rank not known yet
        if p.cond is not None:
            t0 = time.perf_counter()
            try:
                if not eval(p.cond, frame.f_globals, frame.f_locals):  # noqa: S307 - the user's condition
                    self._within_budget(p, frame, "condition", t0)
                    return
            except Exception as exc:  # noqa: BLE001 - reported to the broker, once per point
                self._point_error(p, frame, f"condition raised {type(exc).__name__}: {exc}")
                return
            if not self._within_budget(p, frame, "condition", t0):
                return
        p.hits += 1
        if p.hit is not None and not p.hit(p.hits):
            return
        kind = p.kind
        if kind == "log":
            self._log(p, frame)
        elif kind == "snapshot":
            p.fired += 1
            if p.count and p.fired >= p.count:
                p.dead = True
                agent.rearm_soon()
            payload: dict = {"id": p.point.snapshot, "point": p.id, "time": time.time()}
            if p.exprs:
                t0 = time.perf_counter()
                payload["values"] = expression_values(p.exprs, frame, extremes=p.point.watch is None)
                self._within_budget(p, frame, "snapshot expressions", t0)
            watch = p.point.watch
            if watch is None:
                payload["frames"] = capture_frames(frame)
                agent.emit("snapshot", payload)
            else:  # a divergence watch: lined up by pass (or by a local), no frames
                payload["pass"] = p.hits
                if watch.get("step"):
                    payload["step"] = step_value(frame, watch["step"])
                agent.emit_row(payload)
        else:
            p.fired += 1
            debugger.stop_here(agent, frame, p.id)

    def _log(self, p: ArmedPoint, frame) -> None:
        now = int(clock())
        if now != p.log_second:
            if p.log_dropped:
                self.agent.emit("log", _log_record(p, frame, f"… {p.log_dropped} lines dropped (rate limit)"))
            p.log_second, p.log_sent, p.log_dropped = now, 0, 0
        if p.log_sent >= LOG_RATE:
            p.log_dropped += 1
            return
        p.log_sent += 1
        self.agent.emit("log", _log_record(p, frame, format_log(p.log or "", frame)))

    def _within_budget(self, p: ArmedPoint, frame, what: str, t0: float) -> bool:
        """False, and the point disarmed in this worker with a note, when `what` (started at `t0`)
        ran over EXPRESSION_BUDGET_S: a slow condition must not take the program hostage."""
        took = time.perf_counter() - t0
        if took <= EXPRESSION_BUDGET_S:
            return True
        p.dead = True
        self.agent.rearm_soon()
        p.error = None  # this note goes out even after an earlier error
        self._point_error(
            p,
            frame,
            f"disarmed: the {what} ran {took:.1f} s (budget {EXPRESSION_BUDGET_S:g} s) in this worker",
        )
        return False

    def _point_error(self, p: ArmedPoint, frame, message: str) -> None:
        if p.error is None:  # once per point, not once per pass
            p.error = message
            self.agent.emit("log", dict(_log_record(p, frame, message), error=True))


def _log_record(p: ArmedPoint, frame, message: str) -> dict:
    return {
        "point": p.id,
        "path": frame.f_code.co_filename,
        "line": frame.f_lineno,
        "message": message[:MAX_LOG_LINE_CHARS],
        "time": time.time(),
    }
