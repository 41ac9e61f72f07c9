"""A worker's stdout and stderr (Ray's `worker-*.out|err` on its node), read through that node's
relay in byte ranges: `GET /v1/workers/{id}/logs?stream=&offset=&max=`.
"""

from __future__ import annotations

from raysleuth.probes.logs import MAX_CHUNK, STREAMS
from raysleuth.shared.errors import BadRequest, NotFound


class WorkerLogs:
    def __init__(self, table, relays) -> None:
        self.table = table
        self.relays = relays

    def __str__(self) -> str:
        return "WorkerLogs"

    async def read(
        self, worker_id: str, stream: str = "out", offset: int = -65536, max_bytes: int = MAX_CHUNK
    ) -> dict:
        """{worker, stream, path, offset, next_offset, size, data}; a negative offset reads the
        tail (that many bytes before the end); ask again from `next_offset` to follow."""
        if stream not in STREAMS:
            raise BadRequest(
                f"stream must be one of {', '.join(STREAMS)}, not {stream!r}",
                "Use ?stream=out or ?stream=err.",
            )
        if max_bytes <= 0:
            raise BadRequest(f"max must be positive, not {max_bytes}", f"Use ?max=1..{MAX_CHUNK}.")
        w = self.table.get(worker_id)
        if w is None:
            raise NotFound(
                f"No worker with id {worker_id}.", "List workers with GET /v1/workers or `raysleuth list`."
            )
        relay = await self.relays.relay_for(w.node_id)
        res = await relay.worker_log.remote(w.id, w.pid, stream, offset, max_bytes)
        if res.get("error"):
            raise NotFound(res["error"], res.get("hint"))
        return {"worker": w.id, "stream": stream, **res}
