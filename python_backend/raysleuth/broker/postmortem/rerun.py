"""Rerun a failed task under the debugger (issue 26): `POST /v1/crashes/{id}/rerun`.

The crash's kept call (`crashes/<id>.rerun`, a pickle the agent made at the raise) runs again as
a new task with the failed task's runtime_env and CPU/GPU request, submitted by the broker (so in
the broker's job: the failed job's driver may be gone). A one-shot breakpoint on the function's
first line, scoped to the broker's job (`[group job-<id>]`, so no other worker pays for it), stops
it there; the answer names the paused worker for an editor to attach to. What the rerun then does
(raises again, returns) is logged and published as a `rerun` event.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable

from raysleuth.broker.tasks import OwnedTasks
from raysleuth.shared.errors import BadRequest, NotFound, SleuthError

log = logging.getLogger(__name__)

STOP_WAIT_S = 60.0
"""How long a rerun may take to reach its first line (a new worker may have to start)."""


class RerunTimeout(SleuthError):
    status = 504


class Reruns:
    def __init__(self, crashes, points, table, hub, job_id: Callable[[], str | None]) -> None:
        self.crashes = crashes
        self.points = points
        self.table = table
        self.hub = hub
        self._job_id = job_id
        self.tasks = OwnedTasks("reruns")

    async def start(self, crash_id: str, timeout: float = STOP_WAIT_S) -> dict:
        rec = self.crashes.get(crash_id)
        if rec is None:
            raise NotFound(
                f"No crash record {crash_id}.", "List them: GET /v1/crashes or `raysleuth crashes`."
            )
        info = rec.rerun
        if not info:
            raise BadRequest(
                f"crash {crash_id} kept no call to rerun",
                "Only the exception of a plain task (not an actor method, not a hard death) is kept"
                " for a rerun.",
            )
        if info.get("unavailable"):
            raise BadRequest(
                f"crash {crash_id} cannot be rerun: {info['unavailable']}", "Debug it live instead."
            )
        blob = self.crashes.rerun_blob(crash_id)
        job = self._job_id()
        if blob is None or job is None:
            raise BadRequest(f"crash {crash_id}'s kept call is gone", "Run the job again with a breakpoint.")
        rid = f"rerun-{uuid.uuid4().hex[:8]}"
        owner = f"rerun:{rid}"
        path, line = info["path"], int(info["line"])
        await self.points.put_file(
            {
                "path": path,
                "owner": owner,
                "breakpoints": [{"line": line, "condition": f"[group job-{job}]"}],
            },
            who=f"rerun of crash {crash_id}",
        )
        try:
            ref = await asyncio.to_thread(_submit, blob, rid, info)
            self.tasks.spawn(self._outcome(ref, rid, crash_id), f"waiting for {rid}")
            worker = await self._stopped(job, path, line, timeout)
        finally:
            await self.points.put_file({"path": path, "owner": owner, "breakpoints": []}, who=rid)
        if worker is None:
            raise RerunTimeout(
                f"the rerun of crash {crash_id} did not reach {path}:{line} within {timeout:g} s",
                "The cluster may have no free CPU for it (it asks what the failed task had); look at"
                " `raysleuth list` and the Ray dashboard.",
            )
        log.info("%s of crash %s stopped at %s:%d in worker %s", rid, crash_id, path, line, worker.id[:8])
        return {
            "rerun": rid,
            "crash": crash_id,
            "function": info.get("function"),
            "args": info.get("args") or [],
            "worker": worker.id,
            "pid": worker.pid,
            "job_id": job,
            "paused_at": worker.paused_at,
            "note": "a new task in the broker's job, with the failed task's runtime_env; the arguments are"
            " what the failed call's frame held at the raise",
        }

    async def _stopped(self, job: str, path: str, line: int, timeout: float):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for w in self.table.workers():
                at = w.paused_at or {}
                if (
                    w.job_id == job
                    and w.state == "paused"
                    and at.get("path") == path
                    and at.get("line") == line
                ):
                    return w
            await asyncio.sleep(0.1)
        return None

    async def _outcome(self, ref, rid: str, crash_id: str) -> None:
        import ray

        try:
            await ref
            outcome = {"rerun": rid, "crash": crash_id, "result": "returned"}
        except ray.exceptions.RayTaskError as exc:
            cause = exc.cause if getattr(exc, "cause", None) is not None else exc
            outcome = {"rerun": rid, "crash": crash_id, "result": "raised", "error": type(cause).__name__}
        except Exception as exc:  # noqa: BLE001 - the worker died, Ray failed: said as it is
            outcome = {
                "rerun": rid,
                "crash": crash_id,
                "result": "failed",
                "error": f"{type(exc).__name__}: {exc}",
            }
        log.info("%s of crash %s ended: %s", rid, crash_id, outcome)
        self.hub.publish("rerun", outcome)

    async def close(self) -> None:
        await self.tasks.close()


def _submit(blob: bytes, rid: str, info: dict):
    import ray

    from raysleuth.shared import rerun_task

    res = info.get("resources") or {}
    options: dict = {"name": f"{rid} {info.get('function')}", "max_retries": 0}
    options["num_cpus"] = res.get("CPU", 0)
    if res.get("GPU"):
        options["num_gpus"] = res["GPU"]
    if info.get("runtime_env"):
        options["runtime_env"] = info["runtime_env"]
    return ray.remote(rerun_task.run).options(**options).remote(blob, rid)
