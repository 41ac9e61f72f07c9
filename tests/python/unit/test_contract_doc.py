"""The contract in the repository (#24): every route of the broker's router table is in
docs/contract.md, and every route listed there is served."""

from __future__ import annotations

import re
from pathlib import Path

from broker_fakes import services

from raysleuth.broker.http_api import make_app
from raysleuth.shared.proof import HELLO_PATH

CONTRACT = Path(__file__).resolve().parents[3] / "docs" / "contract.md"
ROW = re.compile(r"^\| `(GET|PUT|POST|DELETE) (/v1/[^`?\s]*)`", re.M)


def served() -> set[tuple[str, str]]:
    app = make_app(services("t" * 32, object()))
    routes = {(r.method, r.resource.canonical) for r in app.router.routes() if r.method != "HEAD"}
    return routes | {("GET", HELLO_PATH)}  # answered by the middleware, before the router


def documented() -> set[tuple[str, str]]:
    return set(ROW.findall(CONTRACT.read_text()))


def test_every_served_route_is_documented():
    missing = sorted(served() - documented())
    assert not missing, f"routes missing from {CONTRACT.name}'s route table: {missing}"


def test_every_documented_route_is_served():
    gone = sorted(documented() - served())
    assert not gone, f"{CONTRACT.name} lists routes the broker does not serve: {gone}"


def test_the_table_is_read():
    assert len(documented()) >= 30  # the pattern still matches the table's rows
