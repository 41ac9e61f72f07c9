"""A small synchronous client of the broker's HTTP API, for the CLI, the demo and scripts.

Finds the broker from `--broker URL`, else RAYSLEUTH_BROKER, else `<state dir>/broker.json`;
the token from RAYSLEUTH_TOKEN, else the token file.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from pathlib import Path

from raysleuth.errors import BrokerUnreachable, SleuthError
from raysleuth.paths import BROKER_FILE, TOKEN_FILE
from raysleuth.paths import state_dir as resolve_state_dir


class BrokerClient:
    def __init__(self, url: str, token: str, timeout: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def __str__(self) -> str:
        return f"BrokerClient[{self.url}]"

    @classmethod
    def discover(
        cls,
        broker: str | None = None,
        state_dir: str | os.PathLike | None = None,
    ) -> BrokerClient:
        sd = resolve_state_dir(state_dir)
        url = broker or os.environ.get("RAYSLEUTH_BROKER")
        token_file = sd / TOKEN_FILE
        if not url:
            info_path = sd / BROKER_FILE
            try:
                info = json.loads(info_path.read_text())
            except FileNotFoundError:
                raise BrokerUnreachable(
                    f"No broker found: {info_path} does not exist.",
                    "Start one with `raysleuth broker` (on the Ray head node), or pass --broker URL"
                    " / set RAYSLEUTH_BROKER.",
                ) from None
            except ValueError as exc:
                raise SleuthError(
                    f"{info_path} is not valid JSON ({exc}).", "Remove it and start the broker again."
                ) from exc
            url = info["http"]
            token_file = Path(info.get("token_file") or token_file)
        token = os.environ.get("RAYSLEUTH_TOKEN", "").strip()
        if not token:
            try:
                token = token_file.read_text().strip()
            except OSError as exc:
                raise SleuthError(
                    f"Cannot read the broker token at {token_file} ({exc.strerror}).",
                    "Set RAYSLEUTH_TOKEN, or run as the user who started the broker.",
                ) from exc
        return cls(url, token)

    def request(self, method: str, path: str, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.url + path,
            data=data,
            method=method,
            headers={
                "Authorization": f"Bearer {self.token}",
                "Content-Type": "application/json",
                "User-Agent": f"raysleuth-cli (pid {os.getpid()})",
            },
        )
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return json.load(resp)
        except urllib.error.HTTPError as exc:
            try:
                err = json.load(exc)
            except ValueError:
                err = {"error": f"HTTP {exc.code} from {self.url}{path}", "hint": None}
            e = SleuthError(err.get("error") or f"HTTP {exc.code}", err.get("hint"))
            e.status = exc.code
            raise e from None
        except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
            reason = getattr(exc, "reason", exc)
            raise BrokerUnreachable(
                f"Cannot reach the broker at {self.url} ({reason}).",
                'Start it with "raysleuth broker" or pass --broker URL / set RAYSLEUTH_BROKER.',
            ) from None

    def get(self, path: str):
        return self.request("GET", path)

    def workers(self) -> list[dict]:
        return self.get("/v1/workers")

    def nodes(self) -> list[dict]:
        return self.get("/v1/nodes")

    def put(self, path: str, body):
        return self.request("PUT", path, body)

    def post(self, path: str, body):
        return self.request("POST", path, body)

    def delete(self, path: str):
        return self.request("DELETE", path)

    def set_breakpoints(
        self, path: str, breakpoints: list[dict], root: str | None = None, owner: str | None = None
    ) -> dict:
        """Replace `owner`'s breakpoints in `path` (absent: the broker's default owner, `api`)."""
        body = {"path": path, "breakpoints": breakpoints}
        if owner:
            body["owner"] = owner
        if root:
            body["root"] = root
        return self.put("/v1/breakpoints", body)

    def breakpoints(self) -> list[dict]:
        return self.get("/v1/breakpoints")
