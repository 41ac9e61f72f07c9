"""Path mapping between the editor's files and a worker's files, applied to whole DAP messages.

Every `source.path` in a message is mapped, wherever it sits (stack frames, breakpoints, output
and loadedSource events, setBreakpoints arguments), so no command needs its own rule.
"""

from __future__ import annotations

import posixpath


class PathMapper:
    def __init__(self, mappings: list[dict] | None = None) -> None:
        pairs = []
        for m in mappings or []:
            local, remote = m.get("localRoot"), m.get("remoteRoot")
            if isinstance(local, str) and isinstance(remote, str) and local and remote:
                pairs.append((_norm(local), _norm(remote)))
        # Longest roots first, so nested mappings win over their parents.
        self.pairs = sorted(pairs, key=lambda p: -max(len(p[0]), len(p[1])))

    def __bool__(self) -> bool:
        return bool(self.pairs)

    def to_remote(self, path: str) -> str:
        return self._swap(path, 0, 1)

    def to_local(self, path: str) -> str:
        return self._swap(path, 1, 0)

    def _swap(self, path: str, src: int, dst: int) -> str:
        for pair in self.pairs:
            root = pair[src]
            if path == root or path.startswith(root + "/"):
                return pair[dst] + path[len(root) :]
        return path

    def map_message(self, message, to_remote: bool):
        """Map every `source.path` in `message` in place; returns it."""
        if not self.pairs:
            return message
        fn = self.to_remote if to_remote else self.to_local
        _walk(message, fn)
        return message


def _norm(path: str) -> str:
    return posixpath.normpath(path).rstrip("/") or "/"


def _walk(obj, fn) -> None:
    if isinstance(obj, dict):
        src = obj.get("source")
        if isinstance(src, dict) and isinstance(src.get("path"), str):
            src["path"] = fn(src["path"])
        for v in obj.values():
            if isinstance(v, (dict, list)):
                _walk(v, fn)
    elif isinstance(obj, list):
        for v in obj:
            if isinstance(v, (dict, list)):
                _walk(v, fn)
