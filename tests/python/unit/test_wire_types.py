"""The extension's wire types (extension/broker/wire.ts) are generated from the Python model:
a field added to `Worker` or a crash record reaches TypeScript, or this fails (issue 24)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _gen():
    spec = importlib.util.spec_from_file_location("gen_wire_types", ROOT / "scripts" / "gen_wire_types.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gen_wire_types"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_wire_ts_is_the_generated_text():
    gen = _gen()
    assert gen.OUT.read_text() == gen.render(), "stale: run python scripts/gen_wire_types.py"


def test_every_worker_field_is_in_the_typescript_interface():
    from raysleuth.model.worker import FIELDS

    text = (ROOT / "extension" / "broker" / "wire.ts").read_text()
    body = text[text.index("export interface Worker {") :]
    body = body[: body.index("\n}")]
    for name in FIELDS:
        assert f"\n  {name}: " in body, name


def test_a_new_field_changes_the_text(monkeypatch):
    """The check can fail: a field added to the model shows in the rendered TypeScript."""
    import dataclasses

    from raysleuth.model import worker

    gen = _gen()
    before = gen.render()
    added = [("added_field", "int | None", dataclasses.field(default=None))]
    Extra = dataclasses.make_dataclass("Worker", added, bases=(worker.Worker,))
    Extra.__module__ = worker.__name__
    monkeypatch.setattr(
        gen, "OBJECTS", [(n, Extra if c is worker.Worker else c, o) for n, c, o in gen.OBJECTS]
    )
    monkeypatch.setattr(gen, "field_docs", lambda cls: {})
    after = gen.render()
    assert "added_field: number | null;" in after and after != before


def test_unknown_python_types_are_refused():
    import pytest

    gen = _gen()
    with pytest.raises(TypeError, match="no TypeScript type"):
        gen.ts_type(complex)
