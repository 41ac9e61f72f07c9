"""The version check: an unsupported Python or Ray is refused at start with what to install, in the
agent's start-up hook and in `raysleuth broker`; supported ones pass. No Ray started."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from raysleuth import _activate, cli
from raysleuth.shared import versions

WORKER_ARGV = ["/venv/lib/python3.11/site-packages/ray/_private/workers/default_worker.py", "--x"]


@pytest.mark.parametrize(
    "text, parsed",
    [("2.40.0", (2, 40, 0)), ("2.41.0rc1", (2, 41, 0)), ("3.0.0.dev0", (3, 0, 0)), ("2.9", (2, 9))],
)
def test_parse_version(text, parsed):
    assert versions.parse_version(text) == parsed


@pytest.mark.parametrize("py", [(3, 11, 7), (3, 12, 1), (3, 13, 0)])
def test_tested_pythons_pass(py):
    assert versions.python_problem(py) is None


@pytest.mark.parametrize("py", [(3, 10, 13), (3, 9, 0), (3, 14, 0)])
def test_other_pythons_are_refused_naming_the_tested_range(py):
    problem = versions.python_problem(py)
    assert f"Python {py[0]}.{py[1]} is not supported" in problem and "3.11 to 3.13" in problem


def test_ray_floor():
    assert versions.ray_problem("2.40.0") is None and versions.ray_problem("2.60.0") is None
    assert versions.ray_problem(None) is None  # no Ray here: nothing to say (the import fails clearly)
    assert "Ray 2.39.0 is not supported" in versions.ray_problem("2.39.0")
    assert "Ray 2.41.0rc1" not in (versions.ray_problem("2.41.0rc1") or "")


def test_ray_floor_matches_pyproject():
    text = (Path(versions.__file__).parents[2] / "pyproject.toml").read_text()
    floor = ".".join(map(str, versions.RAY_MIN)).removesuffix(".0")
    assert f'"ray[default]>={floor}"' in text
    assert f'requires-python = ">={versions.PYTHON_MIN[0]}.{versions.PYTHON_MIN[1]}"' in text


def test_installed_ray_version_is_read_without_importing_ray():
    code = textwrap.dedent(
        """
        import sys
        from raysleuth.shared.versions import installed_ray_version
        v = installed_ray_version()
        print(v, "ray" in sys.modules)
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "RAYSLEUTH"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    from importlib.metadata import version

    assert out.stdout.split() == [version("ray"), "False"]


def test_check_raises_with_message_and_install_hint():
    with pytest.raises(versions.UnsupportedVersion) as info:
        versions.check_versions((3, 10, 13), "2.30.0")
    err = info.value
    assert "Python 3.10 is not supported" in err.message and "Ray 2.30.0 is not supported" in err.message
    assert "3.11–3.13" in err.hint and "pip install -U 'ray[default]>=2.40.0'" in err.hint
    versions.check_versions((3, 12, 1), "2.40.0")  # supported: no error


def test_broker_refuses_an_unsupported_ray_with_exit_2_and_the_hint(monkeypatch, capsys):
    monkeypatch.setattr(versions, "installed_ray_version", lambda: "2.38.0")
    assert cli.main(["broker", "--address", "127.0.0.1:1"]) == 2
    err = capsys.readouterr().err
    assert "error: Ray 2.38.0 is not supported by Ray Sleuth" in err
    assert "hint: Upgrade Ray: `pip install -U 'ray[default]>=2.40.0'`" in err


def test_broker_refuses_an_unsupported_python(monkeypatch, capsys):
    real = versions.python_problem
    monkeypatch.setattr(versions, "python_problem", lambda version_info=None: real((3, 14, 0)))
    assert cli.main(["broker", "--address", "127.0.0.1:1"]) == 2
    assert "error: Python 3.14 is not supported by Ray Sleuth" in capsys.readouterr().err


def test_worker_start_up_hook_refuses_with_one_line_and_starts_no_agent(monkeypatch):
    started = []
    monkeypatch.setattr(versions, "installed_ray_version", lambda: "2.38.0")
    monkeypatch.setattr("raysleuth.agent.start_when_connected", lambda source: started.append(source))
    err = io.StringIO()
    assert _activate.activate(WORKER_ARGV, stderr=err) is False
    assert started == []
    lines = err.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("raysleuth: the agent is off in this worker: Ray 2.38.0")
    assert "pip install -U" in lines[0]


def test_worker_start_up_hook_starts_the_agent_on_a_supported_version(monkeypatch):
    started = []
    monkeypatch.setattr(versions, "installed_ray_version", lambda: "2.60.0")
    monkeypatch.setattr("raysleuth.agent.start_when_connected", lambda source: started.append(source))
    err = io.StringIO()
    assert _activate.activate(WORKER_ARGV, stderr=err) is True
    assert started == ["env"] and err.getvalue() == ""


def test_hook_does_nothing_outside_ray_workers(monkeypatch):
    monkeypatch.setattr(versions, "installed_ray_version", lambda: "1.0.0")
    err = io.StringIO()
    assert _activate.activate(["/usr/bin/raylet"], stderr=err) is False and err.getvalue() == ""


def test_init_on_an_unsupported_ray_warns_with_the_hint_and_starts_no_agent(monkeypatch):
    import raysleuth

    started = []
    monkeypatch.setattr(versions, "installed_ray_version", lambda: "2.38.0")
    monkeypatch.setattr("raysleuth.agent.start_when_connected", lambda source: started.append(source))
    off = r"Ray Sleuth is off in this process: Ray 2\.38\.0.*pip install -U"
    with pytest.warns(RuntimeWarning, match=off):
        raysleuth.init()
    assert started == []
    monkeypatch.setattr(versions, "installed_ray_version", lambda: "2.60.0")
    raysleuth.init()
    assert started == ["api"]


def test_setup_hook_refuses_with_the_same_line_and_still_runs_the_users_hook(monkeypatch, capsys):
    from raysleuth import agent

    started, user = [], []
    monkeypatch.setattr(versions, "installed_ray_version", lambda: "2.38.0")
    monkeypatch.setattr(agent, "_start", lambda source, wait_for_connect: started.append(source))
    monkeypatch.setattr(agent, "_call_user_hook", user.append)
    monkeypatch.setenv("RAYSLEUTH_SETUP_HOOK", "mine.hook")
    agent.setup()
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("raysleuth: the agent is off in this worker: Ray 2.38.0")
    assert started == [] and user == ["mine.hook"]
