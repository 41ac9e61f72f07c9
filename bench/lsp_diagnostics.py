"""Benchmark: the language server's diagnostics on a 5,000-line file of remote code (issue 15),
against `ruff check` on the same file in the same run.

Starts the real `raysleuth lsp` (no broker: static checks only), opens the file, then makes
ROUNDS edits (a comment line inserted at the top and removed again, as typing does) and times
each didChange until its publishDiagnostics. Prints one JSON line:
  lines, findings        the file's size and how many diagnostics the server publishes for it
  lsp_p50_ms, lsp_p95_ms didChange → publishDiagnostics (target p95 <= 200); the server keeps
                         each top-level chunk's parse and findings, so an edit re-checks one chunk
  open_p50_ms            didOpen of a document it has not seen → publishDiagnostics: the whole
                         file parsed and checked (the cold case, what an edit would cost uncached)
  analyze_p50_ms         the whole-file analysis alone, in this process (parse + checks)
  ruff_p50_ms            `ruff check --isolated --no-cache` on the file (process start included)
  lsp_vs_ruff            lsp_p50_ms / ruff_p50_ms: a ratio to a fast, well-known linter
  open_vs_ruff           open_p50_ms / ruff_p50_ms
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common

from raysleuth.lsp.checks import analyze

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "30"))
LINES = 5000

BLOCK = """

@ray.remote(num_cpus=1)
def shard_{i}(data, scale):
    total = 0.0
    for j, x in enumerate(data):
        total += x * scale + j
    if total < 0:
        breakpoint()
    return total


@ray.remote
class Worker{i}:
    def __init__(self, rank):
        self.rank = rank
        self.seen = []

    def step(self, batch):
        self.seen.append(len(batch))
        return sum(batch) / max(len(batch), 1)

    def state(self):
        return {{"rank": self.rank, "seen": len(self.seen)}}


def driver_{i}(n, items):
    weights = np.ones((1024, 1024))
    refs = [shard_{i}.remote(items, k) for k in range(n)]
    out = []
    for r in range(n):
        out.append(ray.get(shard_{i}.remote(items, r)))
    workers = [Worker{i}.remote(k) for k in range(4)]
    for w in workers:
        w.step.remote(items)
    scores = [shard_{i}.remote(weights, k) for k in range(n)]
    return ray.get(refs) + out + ray.get(scores)
"""


def make_file(path: Path) -> int:
    head = '"""A generated program of remote code (bench/lsp_diagnostics.py)."""\n\n'
    parts = [head + "import numpy as np\nimport ray\n"]
    i = 0
    while sum(p.count("\n") for p in parts) < LINES:
        parts.append(BLOCK.format(i=i))
        i += 1
    text = "".join(parts)
    path.write_text(text)
    return text.count("\n")


class RawClient:
    """A bare LSP client over the server's pipes: frames and json only, so the times are the
    server's (a full client's own decoding of hundreds of diagnostics would count otherwise)."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.seq = 0

    def send(self, method: str, params, request: bool = False) -> None:
        msg = {"jsonrpc": "2.0", "method": method, "params": params}
        if request:
            self.seq += 1
            msg["id"] = self.seq
        body = json.dumps(msg).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    async def receive(self) -> dict:
        length = 0
        while True:
            line = await self.proc.stdout.readline()
            if not line:
                raise EOFError("the server closed its stdout")
            if line in (b"\r\n", b"\n"):
                break
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        return json.loads(await self.proc.stdout.readexactly(length))

    async def wait_for(self, method: str) -> tuple[float, dict]:
        while True:
            msg = await self.receive()
            if msg.get("method") == method:
                return time.perf_counter(), msg["params"]
            if "id" in msg and "method" in msg:  # a request to the client (codeLens/refresh): answer it
                self.proc.stdin.write(_frame({"jsonrpc": "2.0", "id": msg["id"], "result": None}))


def _frame(msg: dict) -> bytes:
    body = json.dumps(msg).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


async def time_lsp(path: Path) -> tuple[list[float], list[float], int]:
    env = {**os.environ, "RAYSLEUTH_STATE_DIR": tempfile.mkdtemp(prefix="rs-bench-lsp-")}
    env.pop("RAYSLEUTH_BROKER", None)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "raysleuth", "lsp", env=env, limit=1 << 26,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    client = RawClient(proc)
    client.send("initialize", {"processId": os.getpid(), "capabilities": {}, "rootUri": None}, request=True)
    while "result" not in await client.receive():
        pass
    client.send("initialized", {})
    uri, text = path.as_uri(), path.read_text()
    doc = {"uri": uri, "languageId": "python", "version": 1, "text": text}
    client.send("textDocument/didOpen", {"textDocument": doc})
    _, first = await asyncio.wait_for(client.wait_for("textDocument/publishDiagnostics"), 60)
    findings = len(first["diagnostics"])
    times = []
    for n in range(ROUNDS):
        if n % 2 == 0:
            change = {"range": _at(0, 0, 0, 0), "text": "# typing\n"}
        else:
            change = {"range": _at(0, 0, 1, 0), "text": ""}
        ident = {"uri": uri, "version": n + 2}
        t0 = time.perf_counter()
        client.send("textDocument/didChange", {"textDocument": ident, "contentChanges": [change]})
        t1, params = await asyncio.wait_for(client.wait_for("textDocument/publishDiagnostics"), 60)
        assert len(params["diagnostics"]) == findings, (len(params["diagnostics"]), findings)
        times.append((t1 - t0) * 1000)
    opens = []  # a document the server has not seen: the whole file parsed and checked, no cache
    for n in range(max(ROUNDS // 3, 5)):
        doc = {"uri": f"{uri}.{n}.py", "languageId": "python", "version": 1, "text": text}
        t0 = time.perf_counter()
        client.send("textDocument/didOpen", {"textDocument": doc})
        t1, _ = await asyncio.wait_for(client.wait_for("textDocument/publishDiagnostics"), 60)
        opens.append((t1 - t0) * 1000)
        client.send("textDocument/didClose", {"textDocument": {"uri": doc["uri"]}})
        await asyncio.wait_for(client.wait_for("textDocument/publishDiagnostics"), 60)  # the clearing one
    client.send("shutdown", None, request=True)
    client.send("exit", None)
    await asyncio.wait_for(proc.wait(), 10)
    return times, opens, findings


def _at(line: int, col: int, end_line: int, end_col: int) -> dict:
    return {"start": {"line": line, "character": col}, "end": {"line": end_line, "character": end_col}}


def time_ruff(path: Path) -> list[float]:
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if ruff is None:
        raise SystemExit("bench: ruff is not installed (it is in python_backend[dev])")
    times = []
    for _ in range(max(ROUNDS // 3, 5)):
        t0 = time.perf_counter()
        subprocess.run([ruff, "check", "--isolated", "--no-cache", "--quiet", str(path)], capture_output=True)
        times.append((time.perf_counter() - t0) * 1000)
    return times


def main() -> None:
    path = Path(tempfile.mkdtemp(prefix="rs-bench-lsp-")) / "remote_program.py"
    lines = make_file(path)
    text = path.read_text()
    analyze_ms = []
    for _ in range(5):
        t0 = time.perf_counter()
        analyze(text)
        analyze_ms.append((time.perf_counter() - t0) * 1000)
    lsp_ms, open_ms, findings = asyncio.run(time_lsp(path))
    ruff_ms = time_ruff(path)
    lsp_p50, ruff_p50 = statistics.median(lsp_ms), statistics.median(ruff_ms)
    result = {
        "lines": lines,
        "findings": findings,
        "rounds": ROUNDS,
        "lsp_p50_ms": lsp_p50,
        "lsp_p95_ms": sorted(lsp_ms)[int(0.95 * (len(lsp_ms) - 1))],
        "lsp_max_ms": max(lsp_ms),
        "open_p50_ms": statistics.median(open_ms),
        "analyze_p50_ms": statistics.median(analyze_ms),
        "ruff_p50_ms": ruff_p50,
        "lsp_vs_ruff": lsp_p50 / ruff_p50,
        "open_vs_ruff": statistics.median(open_ms) / ruff_p50,
    }
    _common.report("lsp_diagnostics", result, {"lsp_p95_ms": 200.0})


if __name__ == "__main__":
    main()
