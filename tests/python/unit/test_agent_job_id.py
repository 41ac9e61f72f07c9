"""A prestarted worker reads Ray's nil job id at connect; its agent asks again and never reports
the nil id (the broker would take it over the State API's, and the hang radar would group the
worker under job `ffffffff`, apart from its own job's ranks)."""

from __future__ import annotations

from types import SimpleNamespace

import ray

from raysleuth.agent.identity import Identity


def test_the_nil_job_id_is_read_again_and_never_reported(monkeypatch):
    ident = Identity()
    ident.static = {"id": "w1", "job_id": "ffffffff"}
    job = {"now": "ffffffff"}
    monkeypatch.setattr(ray, "get_runtime_context", lambda: SimpleNamespace(get_job_id=lambda: job["now"]))
    assert ident.job_id() is None
    job["now"] = "02000000"  # the actor's creation task ran: the worker belongs to a job now
    assert ident.job_id() == "02000000" and ident.static["job_id"] == "02000000"
    job["now"] = "ffffffff"
    assert ident.job_id() == "02000000"  # read once it is real, then fixed


def test_a_failing_runtime_context_leaves_the_job_to_the_broker(monkeypatch):
    def fail():
        raise RuntimeError("Ray is not initialized")

    ident = Identity()
    ident.static = {"id": "w1", "job_id": "ffffffff"}
    monkeypatch.setattr(ray, "get_runtime_context", fail)
    assert ident.job_id() is None
    assert Identity().job_id() is None
