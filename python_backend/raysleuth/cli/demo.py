"""`raysleuth demo`: an embedded local Ray cluster with the agent on, a ranked "training" job of
four actors (rank 2 misbehaves later in the run, and its gradient drifts from the others' from the
start: `raysleuth inspect grad` flags it), and a broker; prints the live worker table.

Everything it starts it also stops, by handle: the Ray cluster it owns and the broker's PID.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import random
import signal
import sys
import time
from pathlib import Path

import raysleuth
from raysleuth.shared.paths import BROKER_FILE
from raysleuth.shared.paths import state_dir as resolve_state_dir

WORLD_SIZE = 4
BAD_RANK = 2
"""The rank whose loss diverges from step DIVERGE_AT and that raises at FAIL_AT."""
DIVERGE_AT = 30
FAIL_AT = 40
GRAD_SIZE = 1024
GRAD_DRIFT = 1e-3
"""How far BAD_RANK's copy of the all-reduced gradient is off (one element), from the first step."""


class Trainer:
    """A stand-in for a data-parallel training worker (pure Python: runs anywhere)."""

    def __init__(self, rank: int, world_size: int) -> None:
        self.rank = rank
        self.world_size = world_size
        raysleuth.set_rank(rank, world_size=world_size)
        self.weights = [random.Random(rank).uniform(-1, 1) for _ in range(256)]
        self.lr = 0.05

    def synced_grad(self):
        """What an all-reduce leaves on every rank: the same array, except on BAD_RANK. The same at
        every step too, so that ranks that capture it at different steps (Compare Across Ranks arms
        each within a heartbeat) still agree."""
        import numpy as np  # Ray's own dependency

        grad = np.sin(np.arange(GRAD_SIZE, dtype=np.float32) * 0.01)
        if self.rank == BAD_RANK:
            grad[0] += GRAD_DRIFT
        return grad

    def step(self, step: int) -> dict:
        grad = self.synced_grad()
        raysleuth.inspect("grad", grad, step=step)  # compare it across ranks: raysleuth inspect grad
        grad_scale = 1.0
        if self.rank == BAD_RANK and DIVERGE_AT <= step <= FAIL_AT:
            grad_scale = 3.0 ** (step - DIVERGE_AT + 1)  # exploding gradients on one rank, once
        loss = 0.0  # the demo watches grad_scale here: ranks agree until step DIVERGE_AT
        for i, w in enumerate(self.weights):
            g = (w - math.sin(i + step * 0.01)) * grad_scale
            self.weights[i] = w - self.lr * g
            loss += g * g
        loss /= len(self.weights)
        raysleuth.event("step", step=step, loss=loss)
        if self.rank == BAD_RANK and step == FAIL_AT:
            self.weights = [0.0] * len(self.weights)  # "recover" for the steps after the crash
            raise FloatingPointError(f"loss diverged on rank {self.rank} at step {step}: {loss:.3g}")
        time.sleep(0.2)
        return {"rank": self.rank, "step": step, "loss": loss}


def _planned_crash(rank: int, step: int, cause) -> bool:
    """The one failure the demo stages (BAD_RANK diverges and raises at FAIL_AT)."""
    return rank == BAD_RANK and step == FAIL_AT and isinstance(cause, FloatingPointError)


def prefetch_batch(step: int) -> int:
    """A plain Ray task, so the tree shows task workers too."""
    time.sleep(0.3)
    return step


def _wait_for_ranked_workers(client, n: int, timeout: float) -> list[dict]:
    deadline = time.monotonic() + timeout
    workers: list[dict] = []
    while time.monotonic() < deadline:
        workers = client.workers()
        ranks = {w["rank"] for w in workers if w["agent"] and w["state"] != "exited"}
        if set(range(n)) <= ranks:
            return workers
        time.sleep(0.25)
    return workers


def _wait_for_watcher(client, stop: dict) -> None:
    """Before the planned crash of a `--forever` run: wait until an editor (or `raysleuth events`)
    watches, so the crash is held for it and its notification reaches someone (issue 25)."""
    if client.get("/v1/status").get("watchers"):
        return
    _say(
        f"      waiting for an editor before rank {BAD_RANK}'s planned crash at step {FAIL_AT}: open "
        "the Ray Sleuth view in VS Code (or run `raysleuth events`); Ctrl-C stops the demo"
    )
    while not stop["now"] and not client.get("/v1/status").get("watchers"):
        time.sleep(0.5)
    if not stop["now"]:
        _say("      an editor watches: training on")


def _watch_for_divergence(client) -> None:
    """A first-divergence watch on `grad_scale` in Trainer.step, lined up by `step`: it names rank
    BAD_RANK at step DIVERGE_AT as a case (issue 26)."""
    import inspect

    lines, first = inspect.getsourcelines(Trainer.step)
    line = first + next(i for i, text in enumerate(lines) if "the demo watches grad_scale" in text)
    wid = client.post(
        "/v1/watches",
        {"path": os.path.abspath(__file__), "line": line, "expressions": ["grad_scale"], "step": "step"},
    )["id"]
    _say(f"      watching grad_scale across ranks at demo.py:{line} (raysleuth cases shows what it finds)")
    _wait_armed(client, wid)


def _wait_armed(client, wid: str, timeout: float = 60.0) -> None:
    """Until every rank armed the watch: on a loaded machine a rank that arms late misses the
    steps before it, and the divergence at step DIVERGE_AT with them."""
    armed, end = 0, time.monotonic() + timeout
    while time.monotonic() < end:
        armed = sum(wid in (w.get("armed") or []) for w in client.workers())
        if armed >= WORLD_SIZE:
            return
        time.sleep(0.1)
    _say(f"      warning: the watch is armed on {armed} of {WORLD_SIZE} ranks after {timeout:.0f} s")


def _say_new_cases(client, seen: set) -> None:
    """Each case the broker filed since the last look, as one line: the detective's findings."""
    for case in reversed(client.get("/v1/cases")):
        if case["id"] not in seen:
            seen.add(case["id"])
            _say(f"      case ({case['kind']}): {case['summary']}")


def _live_broker_file(sd: Path) -> bool:
    try:
        pid = json.loads((sd / BROKER_FILE).read_text())["pid"]
        os.kill(pid, 0)
        return True
    except (OSError, ValueError, KeyError):
        return False


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run_demo(state_dir: str | None, steps: int, forever: bool) -> int:
    from raysleuth.broker.process import start_broker
    from raysleuth.cli.table import format_workers
    from raysleuth.client import BrokerClient
    from raysleuth.shared.errors import SleuthError

    sd = resolve_state_dir(state_dir)
    if _live_broker_file(sd):
        raise SleuthError(
            f"A broker already runs for {sd}.", "Stop it, or run the demo with --state-dir DIR."
        )
    # Workers inherit the raylet's environment: this is the no-code-change activation.
    os.environ["RAYSLEUTH"] = "1"
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # keep the demo on loopback
    import ray

    _say("[1/4] starting an embedded local Ray cluster (agent on: RAYSLEUTH=1) ...")
    mode_before = os.environ.get("RAY_AUTH_MODE")  # unset: Ray's default (token auth) applies
    with _ray_auth_notice_as_ours():
        ctx = ray.init(
            address="local",  # always a new embedded cluster, never one found in /tmp/ray
            num_cpus=WORLD_SIZE + 4,
            include_dashboard=True,
            _node_ip_address="127.0.0.1",
            log_to_driver=False,
            logging_level="WARNING",
        )
    _say(_auth_line())
    broker = None
    unplanned: list[str] = []  # failures other than the staged crash
    stop = {"now": False}

    def on_term(signum, frame):
        stop["now"] = True

    signal.signal(signal.SIGTERM, on_term)
    try:
        _say("[2/4] starting the broker ...")
        # The broker finds Ray's token by itself, as `raysleuth broker` does for a user's cluster:
        # it does not inherit the RAY_AUTH_MODE that Ray's default just set in this process.
        env = (
            None if mode_before is not None else {k: v for k, v in os.environ.items() if k != "RAY_AUTH_MODE"}
        )
        broker = start_broker(sd, address=ctx.address_info["gcs_address"], env=env)
        client = BrokerClient(broker.http, broker.token)
        _say(f"      broker at {broker.http} (DAP {broker.ready['dap']}); log: {broker.log_path}")

        _say(f"[3/4] starting {WORLD_SIZE} ranked Trainer actors ...")
        trainer_cls = ray.remote(num_cpus=1)(Trainer)
        trainers = [trainer_cls.options(name=f"trainer-{r}").remote(r, WORLD_SIZE) for r in range(WORLD_SIZE)]
        prefetch = ray.remote(num_cpus=1)(prefetch_batch)
        workers = _wait_for_ranked_workers(client, WORLD_SIZE, timeout=60)
        print(format_workers(workers), flush=True)
        _say(_connect_help(sd, broker))
        _watch_for_divergence(client)
        # Cases kept from earlier runs in this state dir (their crash records) are not this run's.
        seen_cases: set = {c["id"] for c in client.get("/v1/cases")}

        _say("[4/4] training" + (" until Ctrl-C" if forever else f" for {steps} steps") + " ...")
        step = 0
        while (forever or step < steps) and not stop["now"]:
            if forever and step == FAIL_AT:
                _wait_for_watcher(client, stop)
            batch = prefetch.remote(step)
            refs = [t.step.remote(step) for t in trainers]
            for r, ref in enumerate(refs):
                try:
                    ray.get(ref)
                except ray.exceptions.RayTaskError as exc:
                    planned = _planned_crash(r, step, exc.cause)
                    note = " (planned: the demo's staged crash, kept as a case)" if planned else ""
                    _say(f"      step {step}: rank {r} failed: {exc.cause!r}{note}")
                    if not planned:
                        unplanned.append(f"step {step}, rank {r}: {exc.cause!r}")
            ray.get(batch)
            _say_new_cases(client, seen_cases)
            if unplanned:
                _say(
                    f"error: the demo's training failed where it should not ({unplanned[0]}).\n"
                    "hint: run scripts/setup.sh again (it installs what the demo needs), "
                    "then scripts/demo.sh; the worker's log is under the Ray session's logs/."
                )
                break
            if step % 10 == 0:
                _say(f"      step {step}")
            step += 1
        _say_new_cases(client, seen_cases)
        print(format_workers(client.workers()), flush=True)
    except KeyboardInterrupt:
        pass
    finally:
        _say("stopping the broker and the Ray cluster ...")
        if broker is not None:
            broker.stop()
        ray.shutdown()
    aborted = _say_ray_aborts(ctx.address_info["session_dir"])
    return 1 if aborted or unplanned else 0


RAY_AUTH_LOGGER = "ray._private.authentication.authentication_token_setup"


class _DropRayAuthNotice(logging.Filter):
    """Ray's "Token authentication is enabled for this Ray cluster" warning at a new cluster's
    start reads like an error; the demo says what it means in its own line instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Token authentication is enabled for this Ray cluster")


@contextlib.contextmanager
def _ray_auth_notice_as_ours():
    logger, drop = logging.getLogger(RAY_AUTH_LOGGER), _DropRayAuthNotice()
    logger.addFilter(drop)
    try:
        yield
    finally:
        logger.removeFilter(drop)


def _auth_line() -> str:
    from raysleuth.shared import raytoken

    if raytoken.auth_mode() != "token":
        return "      Ray's token auth is off (RAY_AUTH_MODE is set): nothing needs the token"
    try:
        token = raytoken.find_token()
    except Exception as exc:  # noqa: BLE001 - a line of the demo's output, never its end
        return f"      Ray's token auth is on; its token: {exc}"
    where = token.source if token else "nowhere found"
    return f"      Ray's token auth is on (Ray's default); its token: {where}; the broker finds it there"


def _say_ray_aborts(session_dir: str) -> int:
    """Workers Ray aborted during the demo (its fatal checks, in the session's worker logs)."""
    from raysleuth.probes.logs import fatal_checks

    found = fatal_checks(os.path.join(session_dir, "logs"))
    for f in found:
        _say(f"Ray aborted a worker: {f['check']} ({f['file']}:{f['line']})")
    return len(found)


def _connect_help(sd: Path, broker) -> str:
    default = sd == resolve_state_dir(None)
    where = (
        f"it finds this broker by itself in {sd / BROKER_FILE}"
        if default
        else f'set raySleuth.stateDir to "{sd}", or raySleuth.brokerAddress={broker.http}'
        f" and raySleuth.tokenFile={broker.ready['token_file']}"
    )
    return f"""
VS Code: open the Ray Sleuth view ({where});
  click a worker to attach a debugger to it.
Terminal:  raysleuth list --state-dir {sd}
           raysleuth attach --rank 2 --state-dir {sd}
Your own cluster instead:
  RAYSLEUTH=1 ray start --head            # every worker gets the agent, no code change
  raysleuth broker                        # on the head node
  or per job: runtime_env={{"worker_process_setup_hook": "raysleuth.agent.setup"}}
"""
