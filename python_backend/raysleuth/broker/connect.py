"""Connecting the broker to Ray, and its ready file: small steps `app.py` runs at start and stop."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import sys
from pathlib import Path

from raysleuth.shared import names, raytoken
from raysleuth.shared.errors import SleuthError

log = logging.getLogger(__name__)


def connect_ray(address: str | None):
    """`ray.init` for the broker: never streams worker logs, never starts a cluster of its own."""
    import ray

    target = address or os.environ.get("RAY_ADDRESS") or "auto"
    hint = (
        "Start a cluster with `RAYSLEUTH=1 ray start --head`, or pass --address HOST:PORT "
        "(or set RAY_ADDRESS)."
    )
    probe_gcs(target, hint)
    log.info("%s", raytoken.prepare(target))  # Ray's token auth: found and matched, never by hand
    try:
        with contextlib.redirect_stdout(sys.stderr):
            return ray.init(
                address=target, namespace=names.NAMESPACE, log_to_driver=False, logging_level=logging.WARNING
            )
    except Exception as exc:  # noqa: BLE001 - each becomes one line and a hint, never a traceback
        if raytoken.is_auth_failure(exc):
            raise raytoken.auth_failure(target, exc) from None
        if not isinstance(exc, (ConnectionError, RuntimeError, ValueError)):
            raise
        raise SleuthError(f"Cannot connect to Ray at {target}: {exc}", hint) from exc


def probe_gcs(target: str, hint: str, timeout: float = 5.0) -> None:
    """Fail fast on an explicit HOST:PORT that nothing listens on (ray.init retries for minutes)."""
    host, sep, port = target.rpartition(":")
    if not sep or "://" in target or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        raise SleuthError(f"Cannot connect to Ray at {target}: {exc.strerror or exc}", hint) from None


def shutdown_ray() -> None:
    import ray

    try:
        ray.shutdown()
    except Exception as exc:  # noqa: BLE001 - the broker exits anyway
        log.info("ray.shutdown at stop: %s", exc)


def url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def is_loopback(host: str) -> bool:
    """Whether binding `host` keeps the broker on this machine (127.0.0.0/8, ::1, localhost)."""
    import ipaddress

    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a hostname: it may resolve to any interface


def exposure_warning(host: str) -> str | None:
    """What the broker says at start when it listens beyond loopback, else None."""
    if is_loopback(host):
        return None
    return (
        f"The broker listens on {host}, not only on this machine: anyone who can reach its ports "
        "and has the token can run code in every worker. Prefer --host 127.0.0.1 and a tunnel "
        "(ssh -L, kubectl port-forward); see docs/security.md."
    )


def write_json(path: Path, data: dict) -> None:
    """Atomically, mode 0600."""
    from raysleuth.shared.privfiles import write_private

    write_private(path, json.dumps(data, indent=1) + "\n")


def remove_if_ours(path: Path) -> None:
    """Remove the ready file unless another broker (another pid) has written it since."""
    try:
        if json.loads(path.read_text()).get("pid") == os.getpid():
            path.unlink()
    except (OSError, ValueError) as exc:
        log.info("leaving %s: %s", path, exc)
