"""The broker's rank groups (issue 27): the user's, kept in `<state-dir>/groups.json` (0600) so
they survive a broker restart, and the built-in `all`, `job-<id>` and one per verl worker group
and role (issue 38). A user's group of the same name as a worker group wins."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

from raysleuth.model.groups import (
    builtin_groups,
    check_name,
    members,
    parse_group,
    worker_group,
    worker_group_names,
)
from raysleuth.model.worker import Worker
from raysleuth.shared.errors import BadRequest, NotFound
from raysleuth.shared.privfiles import write_private

log = logging.getLogger(__name__)

MAX_GROUPS = 256
MAX_WORKER_GROUP_NAMES = 1024
"""verl worker group and role names remembered once seen (a point naming one stays one)."""


class GroupBook:
    def __init__(self, state_dir: Path | None, workers: Callable[[], list[Worker]]) -> None:
        self._file = state_dir / "groups.json" if state_dir is not None else None
        self._workers = workers
        self._groups: dict[str, dict] = {}
        self._worker_groups: set[str] = set()
        """Worker group and role names seen on workers (`[group critic]` resolves to the group
        between two jobs too)."""
        self._load()

    def _load(self) -> None:
        if self._file is None or not self._file.exists():
            return
        try:
            for g in json.loads(self._file.read_text()).get("groups") or []:
                self._groups[g["name"]] = parse_group(
                    g["name"], {k: g.get(k) for k in ("ranks", "workers", "expression", "job_id")}
                )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring unreadable %s: %s", self._file, exc)

    def _save(self) -> None:
        if self._file is not None:
            write_private(self._file, json.dumps({"groups": list(self._groups.values())}, indent=1))

    def _builtins(self, workers: list[Worker]) -> list[dict]:
        return [g for g in builtin_groups(workers) if g["name"] not in self._groups]

    def all(self) -> list[dict]:
        workers = self._workers()
        return [self._listed(g, workers) for g in self._builtins(workers) + list(self._groups.values())]

    def _listed(self, g: dict, workers: list[Worker]) -> dict:
        live = members(g, workers)
        ranks = sorted({w.rank for w in live if w.rank is not None})
        return {"name": g["name"], "ranks": ranks, "workers": [w.id for w in live], "job_id": g.get("job_id"),
                "expression": g.get("expression"), "worker_group": g.get("worker_group")}  # fmt: skip

    def get(self, name: str) -> dict:
        for g in self._builtins(self._workers()) + list(self._groups.values()):
            if g["name"] == name:
                return g
        raise NotFound(f"No group {name!r}.", "List them: GET /v1/groups; make one: PUT /v1/groups/{name}.")

    def definition(self, name: str) -> dict | None:
        """What a `[group NAME]` breakpoint scope stands for now: the user's group, `all`,
        `job-<id>` (any job id, so a point may name a job before it starts), or a verl worker
        group or role a worker carries or carried (`critic`); None: no such group."""
        if name in self._groups:
            return dict(self._groups[name])
        if name == "all":
            return {"name": name, "ranks": None, "workers": None, "expression": None, "job_id": None}
        job = name[4:] if name.startswith("job-") else ""
        if job and all(c in "0123456789abcdefABCDEF" for c in job):
            return {"name": name, "ranks": None, "workers": None, "expression": None, "job_id": job}
        if name not in self._worker_groups:
            for w in self._workers():
                if len(self._worker_groups) < MAX_WORKER_GROUP_NAMES:
                    self._worker_groups.update(worker_group_names(w))
        if name in self._worker_groups:
            return worker_group(name)  # a verl worker group or role: its workers match themselves
        return None

    def put(self, name: str, body: dict) -> dict:
        group = parse_group(name, body)
        if name not in self._groups and len(self._groups) >= MAX_GROUPS:
            raise BadRequest(
                f"at most {MAX_GROUPS} groups", "DELETE /v1/groups/{name} one you no longer use."
            )
        self._groups[name] = group
        self._save()
        return self._listed(group, self._workers())

    def delete(self, name: str) -> None:
        check_name(name)
        if self._groups.pop(name, None) is None:
            raise NotFound(f"No group {name!r}.", "List them: GET /v1/groups.")
        self._save()

    def member_ids(self, name: str) -> list[str]:
        """The ids of the group's live workers now (a selector for continue, pause and step)."""
        return [w.id for w in members(self.get(name), self._workers())]
