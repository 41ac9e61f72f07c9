"""Library frames (issue #38): which frames of a stack are the user's code and which are the
frameworks' internals a user does not debug (verl's dispatch wrappers, Ray's task executor and
its Cython frames, torch's distributed wrappers, functools, the standard library).

One rule for every side: the agent (a crash's top frame), the broker (`library` on the frames of
`GET /v1/stacks`, the stack tree, the DAP stack it forwards) and the CLI. By path only, so it
holds for py-spy's frames and for a worker on another machine:

- no source file: an empty path, a pseudo-file (`<frozen ...>`, `<string>`) or a Cython source
  (`.pyx`/`.pxd`/`.pxi`: the path is where Ray's wheel was built, not a file anyone has);
- the standard library (`lib/pythonX.Y/`) and installed packages (`site-packages/`,
  `dist-packages/`);
- known frameworks wherever they live (a source checkout, an editable install): Ray's
  `python/ray/`, `ray/_private/`, `ray/_raylet`, `ray/util/`; verl's `single_controller/` and
  `utils/transferqueue_utils.py`; `torch/distributed/`, torch's module call wrapper and
  `no_grad`'s; the Ray Sleuth agent's own frames.

The user's code stays the user's: a project folder, Ray's unpacked `working_dir`, an editable
install of the user's package (its files are in the project, not in site-packages). A package
of the user's that is installed into site-packages is named in RAYSLEUTH_USER_PACKAGES
(comma-separated top-level names, read where the rule runs: the broker, and the worker for a
crash's top frame); a name there wins over every rule but "no source file".

Standard library only.
"""

from __future__ import annotations

import functools
import os
import re

USER_PACKAGES_ENV = "RAYSLEUTH_USER_PACKAGES"

_NO_SOURCE = re.compile(r"\.(pyx|pxd|pxi)$", re.IGNORECASE)
_INSTALLED = re.compile(r"[/\\](?:site|dist)-packages[/\\]")
_STDLIB = re.compile(r"[/\\]lib[/\\]python\d+(?:\.\d+)?t?[/\\]", re.IGNORECASE)
FRAMEWORK_PATHS = (
    "python/ray/",
    "ray/_private/",
    "ray/_raylet",
    "ray/util/",
    "ray/_common/",
    "ray/actor.py",
    "ray/remote_function.py",
    "verl/single_controller/",
    "verl/utils/transferqueue_utils.py",
    "torch/distributed/",
    "torch/nn/modules/module.py",
    "torch/utils/_contextlib.py",
    "raysleuth/agent/",
)
"""Frameworks' internals by path fragment (a whole segment: `/ray/util/`, not `/myray/util/`)."""

_FRAMEWORK = re.compile("(?:^|/)(?:" + "|".join(re.escape(p) for p in FRAMEWORK_PATHS) + ")")


def user_packages(env: dict | None = None) -> frozenset[str]:
    """The top-level package names RAYSLEUTH_USER_PACKAGES declares the user's."""
    return _names((os.environ if env is None else env).get(USER_PACKAGES_ENV) or "")


@functools.lru_cache(maxsize=16)
def _names(text: str) -> frozenset[str]:
    return frozenset(n.strip() for n in text.split(",") if n.strip().isidentifier())


def has_source(path: str | None) -> bool:
    """Whether the path can be a source file at all: not empty, no `<pseudo-file>`, no Cython
    source (the path a Cython frame names is the build machine's; the file ships nowhere)."""
    return bool(path) and not str(path).startswith("<") and not _NO_SOURCE.search(str(path))


def is_compiled(path: str | None) -> bool:
    """A Cython source path (`python/ray/_raylet.pyx`): a file no one has, unlike a `<string>`
    whose text a debugger may still hold."""
    return bool(path) and bool(_NO_SOURCE.search(str(path)))


def _users(posix: str, names: frozenset[str]) -> bool:
    return any(f"/{n}/" in posix or posix.endswith(f"/{n}.py") for n in names)


def is_library(path: str | None, users: frozenset[str] | None = None) -> bool:
    """Whether a frame's file is a library's, not the user's (see the module doc)."""
    return _library(str(path or ""), user_packages() if users is None else users)


@functools.lru_cache(maxsize=8192)
def _library(path: str, users: frozenset[str]) -> bool:
    """The rule, once per file: a stack of a thousand ranks names the same few files."""
    if not has_source(path):
        return True
    posix = path.replace("\\", "/")
    if _users(posix, users):
        return False
    return bool(_INSTALLED.search(posix) or _STDLIB.search(posix) or _FRAMEWORK.search(posix))


def mark(frames: list, users: frozenset[str] | None = None) -> list:
    """The frames (dicts with `path`) with `library: bool` set on each, as new dicts."""
    names = user_packages() if users is None else users
    return [dict(f, library=is_library(f.get("path"), names)) if isinstance(f, dict) else f for f in frames]


def flagged(frame: dict, users: frozenset[str] | None = None) -> bool:
    """A frame's `library` field where it has one, else the rule on its path."""
    lib = frame.get("library")
    return lib if isinstance(lib, bool) else is_library(frame.get("path"), users)


def top_user(frames: list, users: frozenset[str] | None = None):
    """The innermost frame of the user's (frames innermost first), else the innermost one."""
    return next((f for f in frames if not flagged(f, users)), frames[0] if frames else None)
