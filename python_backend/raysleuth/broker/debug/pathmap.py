"""Automatic path mapping for an attach: the editor's folder (`localRoot` in the attach arguments)
↔ the worker's working directory, when the worker runs from a copy (a runtime_env working_dir
unpacked under Ray's session folder, or another checkout) whose files match by relative path and
content.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os

log = logging.getLogger(__name__)

SAMPLE = 20
"""Python files of the local folder compared by content with the worker's copy."""

MAX_FOLDERS = 2000
"""Folders the sample may visit (a localRoot of "/" must not walk the whole disk)."""


def local_sample(local_root: str) -> dict[str, str]:
    """sha256 of up to SAMPLE .py files under local_root, by relative path ({} if not on this host)."""
    out: dict[str, str] = {}
    if not os.path.isdir(local_root):
        return out
    for visited, (dirpath, dirnames, filenames) in enumerate(os.walk(local_root)):
        if visited >= MAX_FOLDERS:
            break
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in ("node_modules",))
        for name in sorted(filenames):
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                try:
                    with open(path, "rb") as f:
                        out[os.path.relpath(path, local_root)] = hashlib.sha256(f.read(4 << 20)).hexdigest()
                except OSError:
                    continue
                if len(out) >= SAMPLE:
                    return out
    return out


def decide(local: dict[str, str], remote: dict[str, str | None]) -> bool:
    """Map when some sampled files exist on both sides and every one of those matches."""
    both = [rel for rel, digest in remote.items() if digest is not None and rel in local]
    return bool(both) and all(local[rel] == remote[rel] for rel in both)


async def auto_mapping(agents, worker, local_root: str) -> list[dict]:
    """[{localRoot, remoteRoot}] when the worker's cwd is a matching copy of local_root, else []."""
    cwd = worker.cwd
    if not cwd or not local_root or os.path.normpath(cwd) == os.path.normpath(local_root):
        return []
    local = await asyncio.to_thread(local_sample, local_root)  # disk work: not on the event loop
    if not local:
        return []
    res = await agents.command(worker.id, {"op": "digests", "root": cwd, "paths": list(local)}, 20.0)
    if not res.get("ok") or not decide(local, res.get("digests") or {}):
        log.info("no automatic path mapping for %s: %s and %s differ", worker.id[:8], local_root, cwd)
        return []
    return [{"localRoot": local_root, "remoteRoot": cwd}]
