"""Ray's own frames, told apart in what a worker's debugpy answers: the task executor
(`ray._raylet.execute_task`, Ray's function wrappers) is not the user's code, nor are verl's
dispatch wrappers or other library frames (`model/frames.py`, issue #38).

`tidy(command, body)` rewrites a response body on its way to the editor (the DAP front door):
- stackTrace: library frames (inside the ray package, verl's `single_controller`, site-packages,
  the standard library) get presentationHint "subtle" and their source "deemphasize", so VS Code
  dims them and selects the user's innermost frame (issues #13, #38); a frame with no source
  file (Cython's `python/ray/_raylet.pyx`, which pydevd makes absolute under the worker's folder
  and offers as decompiled code) keeps only the file's name: no path, no sourceReference;
- exceptionInfo: no "(note: ... execution is paused at: ray._raylet.execute_task)" in the
  exception's name (pydevd adds it when a post-mortem stop sits in Ray's executor), and no Ray
  executor frames in the traceback text.
Pure: dicts in, dicts out; never raises on a body it does not know.
"""

from __future__ import annotations

import re

from raysleuth.model import frames as libframes

_RAY_PATH = re.compile(r"(^|[/\\])(site|dist)-packages[/\\]ray[/\\]|(^|[/\\])python[/\\]ray[/\\]|_raylet")
_PAUSED_NOTE = re.compile(r"\s*\(note: full exception trace is shown but execution is paused at: [^)]*\)")
_TB_FILE = re.compile(r'^\s*File "([^"]*)", line \d+')


def is_ray_path(path: str | None) -> bool:
    """True for a file of the ray package (an installed one, a source checkout's, or Cython's)."""
    if not path:
        return False
    return bool(_RAY_PATH.search(path)) or path.endswith(".pyx")


NO_SOURCE_ORIGIN = "compiled: no source file"
"""A frame's source `origin` where its path names no file (Cython): VS Code shows it greyed."""


def _frame(frame: dict, users: frozenset[str]) -> dict:
    source = frame.get("source") or {}
    path = source.get("path") or source.get("name")
    in_ray = is_ray_path(path) or str(frame.get("name", "")).startswith("ray._raylet")
    if not in_ray and not (path and libframes.is_library(path, users)):
        return frame
    frame = dict(frame, presentationHint="subtle")
    if source:
        frame["source"] = dict(source, presentationHint="deemphasize")
        if libframes.is_compiled(path):
            name = str(path).replace("\\", "/").rpartition("/")[2]
            frame["source"] = {"name": name, "presentationHint": "deemphasize", "origin": NO_SOURCE_ORIGIN}
    return frame


def user_top(frames: list) -> dict | None:
    """The innermost frame of the user's in a stackTrace's frames (not dimmed by `tidy`), else
    the innermost: where a stop is reported to be (`paused_at`)."""
    dicts = [f for f in frames if isinstance(f, dict)]
    return next((f for f in dicts if f.get("presentationHint") != "subtle"), dicts[0] if dicts else None)


def _traceback(text: str) -> str:
    """The traceback text without the entries (File line and its indented lines) in Ray."""
    out: list[str] = []
    skipping = False
    for line in text.splitlines(keepends=True):
        m = _TB_FILE.match(line)
        if m:
            skipping = is_ray_path(m.group(1))
        elif skipping and not line.startswith("    "):
            skipping = False
        if not skipping:
            out.append(line)
    return "".join(out)


def tidy(command: str | None, body: dict) -> dict:
    """The body of a successful response, with Ray's frames told apart (see the module doc)."""
    try:
        if command == "stackTrace" and isinstance(body.get("stackFrames"), list):
            users = libframes.user_packages()
            frames = [_frame(f, users) if isinstance(f, dict) else f for f in body["stackFrames"]]
            return dict(body, stackFrames=frames)
        if command == "exceptionInfo":
            body = dict(body)
            if isinstance(body.get("exceptionId"), str):
                body["exceptionId"] = _PAUSED_NOTE.sub("", body["exceptionId"])
            details = body.get("details")
            if isinstance(details, dict):
                details = dict(details)
                if isinstance(details.get("typeName"), str):
                    details["typeName"] = _PAUSED_NOTE.sub("", details["typeName"])
                if isinstance(details.get("stackTrace"), str):
                    details["stackTrace"] = _traceback(details["stackTrace"])
                body["details"] = details
            return body
    except (TypeError, AttributeError, ValueError):
        return body
    return body
