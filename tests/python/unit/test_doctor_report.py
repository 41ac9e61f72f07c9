"""`raysleuth doctor`'s report text and exit status, and the checks of this very machine."""

from __future__ import annotations

from raysleuth.doctor import format_report, run_doctor
from raysleuth.nodecheck import node_checks


class Client:
    """The broker's answer, at the CLI's seam to it."""

    def __init__(self, report):
        self.report = report

    def get(self, path):
        assert path == "/v1/doctor"
        return self.report


def check(name, status, detail="d", hint=None):
    return {"check": name, "status": status, "detail": detail, "hint": hint}


REPORT = {
    "ok": False,
    "broker": [check("nodes", "ok", "1 alive node(s)")],
    "nodes": [
        {
            "node_id": "abcdef123456",
            "node_ip": "10.0.0.2",
            "checks": [
                check("debugpy", "fail", "ModuleNotFoundError", "pip install debugpy"),
                check("gpu", "info"),
            ],
        }
    ],
}


def test_a_failed_check_is_shown_with_its_hint_and_exits_1(capsys):
    assert run_doctor(Client(REPORT), json_out=False) == 1
    out = capsys.readouterr().out
    assert "node 10.0.0.2 (abcdef)" in out
    assert "[FAIL] debugpy: ModuleNotFoundError" in out and "hint: pip install debugpy" in out
    assert out.rstrip().endswith("1 failed, 0 warnings")


def test_all_good_exits_0():
    good = dict(REPORT, ok=True, nodes=[dict(REPORT["nodes"][0], checks=[check("gpu", "info")])])
    assert format_report(good).endswith("all good")
    assert run_doctor(Client(good), json_out=True) == 0


def test_node_checks_here_never_raise_and_compare_the_clock():
    import time

    checks = {c["check"]: c for c in node_checks(time.time() - 5)}
    assert checks["clock"]["status"] == "warn" and "+5" in checks["clock"]["detail"]
    assert all(c["status"] in ("ok", "info", "warn", "fail") for c in checks.values())
