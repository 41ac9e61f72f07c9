"""`raysleuth attach`: a small terminal debugger over the broker's DAP front door, for users on
SSH without VS Code (parity with Ray's `ray debug`). End of input detaches; the worker runs on.
"""

from __future__ import annotations

import asyncio
import linecache
import sys

from raysleuth.dap.client import ChannelClosed, DapClient, DapError, open_session
from raysleuth.shared.textsafe import lines, one_line

HELP = """commands:
  where | bt            the stack, * marks the current frame
  up, down              move the current frame
  p EXPR                evaluate EXPR in the current frame
  locals                the current frame's locals
  n, s, c               next, step in, continue
  pause                 pause the worker
  break FILE:LINE [if COND]   set a breakpoint (this session only)
  q                     detach (the worker runs on)"""


class TerminalDebugger:
    def __init__(self, client: DapClient, label: str, out=sys.stdout) -> None:
        self.c = client
        self.label = label
        self.out = out
        self.thread_id: int | None = None
        self.frames: list[dict] = []
        self.frame = 0
        self.breakpoints: dict[str, list[dict]] = {}
        self.ended = asyncio.Event()

    def say(self, text: str = "") -> None:
        # Values, names and output come from the worker: no ESC, CR or bidi control raw (#37).
        print(lines(text), file=self.out, flush=True)

    async def pump_events(self) -> None:
        try:
            while True:
                ev = await self.c.next_event()
                name, body = ev.get("event"), ev.get("body") or {}
                if name == "stopped":
                    self.thread_id = body.get("threadId")
                    await self.load_stack()
                    self.say(f"\nstopped ({body.get('reason')}) in {self.label}")
                    self.show_frame()
                elif name == "continued":
                    self.frames = []
                elif name == "output" and body.get("category") != "telemetry":
                    self.say(body.get("output", "").rstrip("\n"))
                elif name == "terminated":
                    self.say("session ended")
                    self.ended.set()
                    return
        except ChannelClosed:
            self.ended.set()

    async def load_stack(self) -> None:
        st = await self.c.request("stackTrace", {"threadId": self.thread_id}, check=False)
        self.frames = (st.get("body") or {}).get("stackFrames") or []
        self.frame = 0

    def show_frame(self) -> None:
        if not self.frames:
            self.say("(not stopped)")
            return
        f = self.frames[self.frame]
        path = (f.get("source") or {}).get("path") or "?"
        self.say(one_line(f"> {path}:{f.get('line')} in {f.get('name')}"))
        text = linecache.getline(path, f.get("line") or 0).rstrip()
        if text:
            self.say(f"  {f.get('line'):>5}  {text.strip()}")

    def need_stop(self) -> bool:
        if not self.frames:
            self.say("the worker is running: `pause` it or wait for a breakpoint")
            return False
        return True

    async def command(self, line: str) -> bool:
        """Run one command line; False when the user quits."""
        cmd, _, rest = line.strip().partition(" ")
        rest = rest.strip()
        if not cmd:
            return True
        if cmd in ("q", "quit", "exit"):
            return False
        if cmd in ("h", "help", "?"):
            self.say(HELP)
        elif cmd in ("where", "bt", "w"):
            for i, f in enumerate(self.frames):
                path = (f.get("source") or {}).get("path") or "?"
                mark = "*" if i == self.frame else " "
                self.say(one_line(f"{mark} {i:>2} {f.get('name')} at {path}:{f.get('line')}"))
            if not self.frames:
                self.say("(not stopped)")
        elif cmd in ("up", "u", "down", "d"):
            if self.need_stop():
                step = 1 if cmd in ("up", "u") else -1
                self.frame = max(0, min(len(self.frames) - 1, self.frame + step))
                self.show_frame()
        elif cmd in ("p", "print"):
            if self.need_stop():
                r = await self.c.request(
                    "evaluate",
                    {"expression": rest, "frameId": self.frames[self.frame]["id"], "context": "repl"},
                    check=False,
                )
                self.say(r["body"]["result"] if r.get("success") else f"error: {r.get('message')}")
        elif cmd == "locals":
            if self.need_stop():
                await self.show_locals()
        elif cmd in ("n", "next", "s", "step", "c", "continue"):
            if self.need_stop():
                op = {"n": "next", "s": "stepIn", "c": "continue"}[cmd[0]]
                self.frames = []
                await self.c.request(op, {"threadId": self.thread_id}, check=False)
        elif cmd == "pause":
            threads = (await self.c.request("threads", {}))["body"]["threads"]
            if threads:
                await self.c.request("pause", {"threadId": threads[0]["id"]}, check=False)
        elif cmd in ("b", "break"):
            await self.set_break(rest)
        else:
            self.say(f"unknown command {cmd!r}; `help` lists them")
        return True

    async def show_locals(self) -> None:
        scopes = (await self.c.request("scopes", {"frameId": self.frames[self.frame]["id"]}))["body"][
            "scopes"
        ]
        if not scopes:
            return
        ref = scopes[0]["variablesReference"]
        for v in (await self.c.request("variables", {"variablesReference": ref}))["body"]["variables"]:
            if not v["name"].startswith("special variables") and not v["name"].startswith(
                "function variables"
            ):
                self.say(one_line(f"{v['name']} = {v.get('value')}"))

    async def set_break(self, spec: str) -> None:
        where, _, cond = spec.partition(" if ")
        path, _, line = where.strip().rpartition(":")
        if not path or not line.isdigit():
            self.say("usage: break FILE:LINE [if COND]")
            return
        bp: dict = {"line": int(line)}
        if cond.strip():
            bp["condition"] = cond.strip()
        bps = self.breakpoints.setdefault(path, [])
        bps.append(bp)
        r = await self.c.request(
            "setBreakpoints", {"source": {"path": path}, "breakpoints": bps}, check=False
        )
        got = (r.get("body") or {}).get("breakpoints") or []
        ok = got and got[-1].get("verified")
        self.say(f"breakpoint {len(bps)} at {path}:{line}" + ("" if ok else " (not verified yet)"))


async def _read_line(prompt: str) -> str | None:
    def read():
        sys.stdout.write(prompt)
        sys.stdout.flush()
        return sys.stdin.readline()

    line = await asyncio.to_thread(read)
    return line if line else None


async def run_attach(dap: str, ticket: str, target: dict) -> int:
    """A terminal session on `target` through the DAP front door at `dap`, attached with a ticket
    (`POST /v1/tickets`, bound to `target`); open_session sends it only to a broker of ours."""
    host, _, port = dap.rpartition(":")
    try:
        client = await open_session(host.strip("[]"), int(port), dict(target, ticket=ticket))
    except DapError as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)
        return 2
    label = ", ".join(f"{k} {v}" for k, v in target.items())
    dbg = TerminalDebugger(client, label)
    print(one_line(f"attached to {label}; `help` lists commands, end of input detaches"), flush=True)
    pump = asyncio.create_task(dbg.pump_events())
    try:
        while not dbg.ended.is_set():
            line = await _read_line("(sleuth) ")
            if line is None or not await dbg.command(line):
                break
    finally:
        if not dbg.ended.is_set():
            try:
                await client.request("disconnect", {}, check=False, timeout=15)
                print("detached; the worker runs on", flush=True)
            except ChannelClosed:
                print("the broker closed the session", flush=True)
        pump.cancel()
        await client.close()
    return 0


def split_target(worker: str | None, rank: int | None, job: str | None) -> dict:
    """The attach target (and the ticket's): a worker id wins over a rank, as the broker reads it."""
    if worker:
        return {"worker": worker}
    target: dict = {"rank": rank}
    if job:
        target["job"] = job
    return target
