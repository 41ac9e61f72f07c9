"""The node relay: one async Ray actor per node that carries DAP bytes between the broker and the
debugpy listeners on its node's loopback. No worker node opens a port for it.

Bytes flow in batches: `recv` long-polls and returns everything buffered, so one Ray call carries
many DAP messages.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import tempfile

import ray

from raysleuth.shared.dbgdirs import sweep_debug_dirs
from raysleuth.shared.swallow import swallow_exception

log = logging.getLogger(__name__)

RECV_CHUNK = 1 << 16
SWEEP_EVERY_S = float(os.environ.get("RAYSLEUTH_DEBUG_DIR_SWEEP_S", "60"))
"""How often the relay removes the debugger folders of this node's workers that are gone."""


class _Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.buffer = bytearray()
        self.closed = False
        self.data_ready = asyncio.Event()
        self.pump: asyncio.Task | None = None


@ray.remote(num_cpus=0, max_concurrency=10_000)
class NodeRelay:
    def __init__(self) -> None:
        self._conns: dict[int, _Conn] = {}
        self._ids = itertools.count(1)
        self._sweeper: asyncio.Task | None = None

    async def ping(self) -> str:
        if self._sweeper is None:  # the first call (the broker's start ping) starts the sweeps
            self._sweeper = asyncio.create_task(self._sweep_forever())
        return ray.get_runtime_context().get_node_id()

    async def sweep_debug_dirs(self) -> list[str]:
        """Remove the debugger folders of this node's workers that are gone
        (raysleuth/shared/dbgdirs.py); the paths removed."""
        return await asyncio.to_thread(sweep_debug_dirs)

    async def _sweep_forever(self) -> None:
        while True:
            try:
                removed = await self.sweep_debug_dirs()
                if removed:
                    log.info("removed %d debugger folder(s) of gone workers", len(removed))
            except Exception:  # noqa: BLE001 - a sweep that failed is tried again next time
                swallow_exception(log, "sweeping the debugger folders of gone workers")
            await asyncio.sleep(SWEEP_EVERY_S)

    async def doctor(self, broker_time: float) -> list[dict]:
        """`raysleuth doctor`'s checks of this node (raysleuth/cli/doctor.py), in a thread."""
        from raysleuth.probes.checks import node_checks

        return await asyncio.to_thread(node_checks, broker_time)

    async def pyspy_dump(self, pid: int, native: bool = False, timeout: float = 5.0) -> dict:
        """`py-spy dump` of a process on this node (raysleuth/probes/pyspy.py), for a worker whose agent
        cannot answer; in a thread, so that DAP bytes keep flowing meanwhile."""
        from raysleuth.probes.pyspy import dump

        return await asyncio.to_thread(dump, pid, native, timeout)

    async def worker_log(
        self, worker_id: str, pid: int | None, stream: str, offset: int, max_bytes: int
    ) -> dict:
        """A byte range of a worker's stdout or stderr file on this node (raysleuth/probes/logs.py),
        or {error, hint} when there is none."""
        from raysleuth.probes.logs import find_worker_log, read_range
        from raysleuth.shared.paths import ray_log_dir

        log_dir = ray_log_dir()
        path = find_worker_log(log_dir, worker_id, pid, stream) if log_dir else None
        if path is None:
            return {
                "error": f"No {stream} file of worker {worker_id[:8]} (pid {pid}) in {log_dir}.",
                "hint": "Ray writes worker-<id>-<job>-<pid>.out/.err there; a worker started with "
                "log redirection off (RAY_LOG_TO_STDERR=1) has none.",
            }
        return await asyncio.to_thread(read_range, path, offset, max_bytes)

    async def fatal_check(self, worker_id: str, pid: int | None) -> dict | None:
        """The fatal Ray check a dead worker of this node died of ({check, file, text}), or None
        (raysleuth/probes/logs.py)."""
        from raysleuth.probes.logs import worker_fatal_check
        from raysleuth.shared.paths import ray_log_dir

        log_dir = ray_log_dir()
        if log_dir is None:
            return None
        return await asyncio.to_thread(worker_fatal_check, log_dir, worker_id, pid)

    async def open(
        self, host: str | None, port: int | None, timeout: float = 10.0, path: str | None = None
    ) -> dict:
        """A connection to a debugger on this node: TCP host:port, or the AF_UNIX socket `path`."""
        try:
            if path is not None:
                connecting = asyncio.open_unix_connection(path)
            else:
                connecting = asyncio.open_connection(host, port)
            reader, writer = await asyncio.wait_for(connecting, timeout)
        except (OSError, asyncio.TimeoutError) as exc:
            where = path if path is not None else f"{host}:{port}"
            return {"ok": False, "error": f"cannot connect to {where} on this node: {exc}"}
        cid = next(self._ids)
        conn = _Conn(reader, writer)
        conn.pump = asyncio.create_task(self._pump(conn))
        self._conns[cid] = conn
        return {"ok": True, "conn": cid}

    async def _pump(self, conn: _Conn) -> None:
        try:
            while True:
                data = await conn.reader.read(RECV_CHUNK)
                if not data:
                    break
                conn.buffer += data
                conn.data_ready.set()
        except (OSError, asyncio.CancelledError) as exc:
            log.debug("relay connection ended: %r", exc)
        finally:
            conn.closed = True
            conn.data_ready.set()

    async def send(self, cid: int, data: bytes) -> bool:
        conn = self._conns.get(cid)
        if conn is None or conn.closed:
            return False
        try:
            conn.writer.write(data)
            await conn.writer.drain()
            return True
        except OSError:
            return False

    async def recv(self, cid: int, wait: float) -> tuple[bytes, bool]:
        """Buffered bytes (waiting up to `wait` s for some) and whether the connection ended."""
        conn = self._conns.get(cid)
        if conn is None:
            return b"", True
        if not conn.buffer and not conn.closed:
            try:
                await asyncio.wait_for(conn.data_ready.wait(), wait)
            except asyncio.TimeoutError:
                pass
        conn.data_ready.clear()
        data = bytes(conn.buffer)
        conn.buffer.clear()
        if conn.closed and not data:
            self._conns.pop(cid, None)
            return b"", True
        return data, False

    async def close(self, cid: int) -> None:
        conn = self._conns.pop(cid, None)
        if conn is not None:
            conn.writer.close()
            if conn.pump:
                conn.pump.cancel()

    async def fault_text(self, path: str, max_bytes: int = 64 * 1024) -> str | None:
        """The last fatal-error report (faulthandler's text) in a dead worker's stderr file.

        Only files in this node's Ray session folder or temp dir are read.
        """
        real = os.path.realpath(path)
        roots = [os.path.realpath(tempfile.gettempdir())]
        try:
            node = ray._private.worker.global_worker.node
            roots += [
                os.path.realpath(node.get_session_dir_path()),
                os.path.realpath(node.get_temp_dir_path()),
            ]
        except Exception:  # noqa: BLE001 - not in a Ray worker: only the temp dir is allowed
            swallow_exception(log, "finding this node's Ray session folder", level=logging.INFO)
        if not any(real.startswith(r + os.sep) for r in roots) or not os.path.isfile(real):
            return None
        with open(real, "rb") as f:
            f.seek(max(0, os.path.getsize(real) - max_bytes))
            text = f.read().decode("utf-8", "replace")
        at = text.rfind("Fatal Python error")
        return text[at:] if at >= 0 else None

    async def connections(self) -> int:
        return len(self._conns)

    async def end_worker(self, pid: int) -> dict:
        """SIGKILL a Ray worker of this node (raysleuth/probes/endworker.py), e.g. one whose C
        code holds its GIL (#37)."""
        from raysleuth.probes.endworker import end_ray_worker

        return end_ray_worker(pid)
