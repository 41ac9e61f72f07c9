"""Which Python and Ray versions Ray Sleuth supports, and one check that says what to install otherwise.

Supported means tested: `scripts/test.sh` runs the integration suite on Python 3.11 and 3.12 and a
smoke subset on 3.13 and on the oldest Ray the package accepts (the README's version matrix). A
version outside these ranges is refused at start (the agent's activation, `raysleuth broker`) with
a message naming what is unsupported and what to install, rather than failing later in a way that
looks like a bug.

This module is imported by the `.pth` start-up hook of every Ray worker: it imports nothing heavy
and reads Ray's version from `ray/_version.py` without importing Ray (well under a millisecond).
"""

from __future__ import annotations

import os
import re
import sys
from types import EllipsisType

from raysleuth.shared.errors import SleuthError

RayVersion = str | None | EllipsisType
"""A Ray version, None when Ray is not installed, `...` for the installed one."""

PYTHON_MIN = (3, 11)
"""Oldest Python tested (the integration suite runs on it)."""

PYTHON_MAX = (3, 13)
"""Newest Python tested (the smoke subset runs on it); newer ones are refused until tested."""

RAY_MIN = (2, 40, 0)
"""Oldest Ray tested (the smoke subset runs on it); keep in step with pyproject's `ray>=`."""


class UnsupportedVersion(SleuthError):
    """This Python or Ray is outside the tested matrix; the hint says what to install."""


_VERSION_RE = re.compile(r"""^version\s*=\s*["']([^"']+)["']""", re.M)


def parse_version(text: str) -> tuple[int, ...]:
    """`"2.40.0"` -> (2, 40, 0); pre-release and local tails (`2.41.0rc1`, `3.0.0.dev0`) are dropped."""
    parts = []
    for piece in text.strip().split("."):
        digits = re.match(r"\d+", piece)
        if not digits:
            break
        parts.append(int(digits.group()))
        if digits.end() != len(piece):
            break
    return tuple(parts)


def _dotted(v: tuple[int, ...]) -> str:
    return ".".join(map(str, v))


def installed_ray_version() -> str | None:
    """The version of the Ray this interpreter would import, without importing it; None if absent."""
    ray = sys.modules.get("ray")
    if ray is not None and getattr(ray, "__version__", None):
        return ray.__version__
    from importlib.machinery import PathFinder

    spec = PathFinder.find_spec("ray")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        try:
            with open(os.path.join(folder, "_version.py"), encoding="utf-8") as f:
                found = _VERSION_RE.search(f.read())
        except OSError:
            continue
        if found:
            return found.group(1)
    try:  # an unusual layout: ask the package metadata (slower, still no import of Ray)
        from importlib.metadata import PackageNotFoundError, version

        return version("ray")
    except (ImportError, PackageNotFoundError):
        return None


def python_problem(version_info=None) -> str | None:
    """Why this Python is unsupported (a sentence), or None when it is supported."""
    v = tuple(version_info or sys.version_info)[:2]
    if PYTHON_MIN <= v <= PYTHON_MAX:
        return None
    return (
        f"Python {_dotted(v)} is not supported by Ray Sleuth: it is tested on Python "
        f"{_dotted(PYTHON_MIN)} to {_dotted(PYTHON_MAX)}."
    )


def ray_problem(ray_version: str | None) -> str | None:
    """Why this Ray is unsupported (a sentence), or None when it is supported or not installed."""
    if ray_version is None:
        return None
    v = parse_version(ray_version)
    if v and v >= RAY_MIN:
        return None
    return f"Ray {ray_version} is not supported by Ray Sleuth: it needs Ray {_dotted(RAY_MIN)} or newer."


def install_hint(py_problem: str | None, ray_problem_: str | None) -> str:
    """What to install, for the problems found."""
    hints = []
    if py_problem:
        hints.append(
            f"Run the cluster and the editor's broker on Python {_dotted(PYTHON_MIN)}–{_dotted(PYTHON_MAX)}"
            " (3.12 or 3.13 debug at no cost until a breakpoint is hit), e.g. a virtualenv made with"
            " `python3.12 -m venv`, then `pip install raysleuth`."
        )
    if ray_problem_:
        hints.append(f"Upgrade Ray: `pip install -U 'ray[default]>={_dotted(RAY_MIN)}'`.")
    return " ".join(hints)


def problems(version_info=None, ray_version: RayVersion = ...) -> tuple[str | None, str | None]:
    """(python problem, ray problem) for this interpreter, or for the versions given (tests)."""
    if ray_version is ...:
        ray_version = installed_ray_version()
    return python_problem(version_info), ray_problem(ray_version)


def unsupported_message(version_info=None, ray_version: RayVersion = ...) -> tuple[str, str] | None:
    """(message, hint) when this Python or Ray is unsupported; None when both are fine."""
    py, ray = problems(version_info, ray_version)
    if not (py or ray):
        return None
    return " ".join(p for p in (py, ray) if p), install_hint(py, ray)


def check_versions(version_info=None, ray_version: RayVersion = ...) -> None:
    """Raise `UnsupportedVersion` (message and hint) when this Python or Ray is unsupported."""
    found = unsupported_message(version_info, ray_version)
    if found:
        raise UnsupportedVersion(*found)


def refusal(message: str, hint: str) -> str:
    """The one line a worker prints on stderr when its Python or Ray is unsupported."""
    return f"raysleuth: the agent is off in this worker: {message} {hint}".rstrip()
