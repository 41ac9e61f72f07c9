"""The case book: cases made from what the broker's services find (`crash-filed`, `hang-found`,
`divergence`, `memory` topics of the hub), newest first, bounded; each new one published as a
`case` stream event. Crash cases of records filed before this broker started come from the
crash store, so the book and the Crashes view agree after a restart.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

from raysleuth.model.case import Case, crash_case, hang_case
from raysleuth.shared.errors import NotFound

if TYPE_CHECKING:
    from raysleuth.broker.events import EventHub
    from raysleuth.broker.postmortem.crashes import CrashStore

log = logging.getLogger(__name__)

MAX_CASES = 500
"""Cases kept (the oldest go first); crash cases come back from the crash store."""


class CaseBook:
    def __init__(self, hub: EventHub, crashes: CrashStore, clock: Callable[[], float] = time.time) -> None:
        self.hub = hub
        self.crashes = crashes
        self.clock = clock
        self._cases: OrderedDict[str, Case] = OrderedDict()
        for rec in reversed(crashes.records()):  # oldest first: the newest ends last
            self._keep(crash_case(rec))
        hub.on("crash-filed", lambda rec: self.add(crash_case(rec)))
        hub.on("hang-found", lambda hang: self.add(hang_case(hang, self.clock())))
        hub.on("case", self.add)

    def _keep(self, case: Case) -> None:
        self._cases.pop(case.id, None)
        self._cases[case.id] = case
        while len(self._cases) > MAX_CASES:
            self._cases.popitem(last=False)

    def add(self, case: Case) -> Case:
        """File a case and tell the stream's clients."""
        self._keep(case)
        log.info("case %s: %s", case.id, case.summary)
        self.hub.publish("case", case.listing())
        return case

    def listing(self) -> list[dict]:
        return [c.listing() for c in sorted(self._cases.values(), key=lambda c: c.time, reverse=True)]

    def get(self, case_id: str) -> Case:
        case = self._cases.get(case_id)
        if case is None:
            raise NotFound(f"No case {case_id}.", "List them: GET /v1/cases or `raysleuth cases`.")
        return case
