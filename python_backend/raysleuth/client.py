"""The synchronous client of the broker's HTTP API and event stream, for the CLI, the demo, the
benchmarks and the tests (the language server follows the stream with aiohttp, in lsp/live.py).

Finds the broker from `--broker URL`, else RAYSLEUTH_BROKER, else `<state dir>/broker.json`;
the token from RAYSLEUTH_TOKEN, else the state dir's token file. Every connection it opens is
checked before its first byte (`shared/peer.py`): the port must belong to a process of ours (or
root's) on loopback, else nothing is sent (a relay another user runs on a stale broker port gets no
token). The broker's HMAC hello proof then tells a wrong or stale token apart; no proxy is used and
no redirect is followed.
"""

from __future__ import annotations

import errno
import http.client
import json
import os
import stat
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from raysleuth.shared.errors import BrokerUnreachable, SleuthError
from raysleuth.shared.paths import BROKER_FILE, TOKEN_FILE
from raysleuth.shared.paths import state_dir as resolve_state_dir
from raysleuth.shared.peer import check_broker_peer
from raysleuth.shared.privfiles import check_state_dir
from raysleuth.shared.proof import HELLO_PATH, new_nonce, proven
from raysleuth.shared.textsafe import one_line


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
        """The broker named by `broker`, RAYSLEUTH_BROKER or the state dir's broker.json, with
        the token of RAYSLEUTH_TOKEN or the state dir; the broker proved it holds that token
        before anything with the token is sent (`verify`)."""
        sd = resolve_state_dir(state_dir)
        check_state_dir(sd)
        url = broker or os.environ.get("RAYSLEUTH_BROKER")
        source = "--broker" if broker else "RAYSLEUTH_BROKER"
        if not url:
            url, source = read_broker_file(sd)["http"], str(sd / BROKER_FILE)
        check_url(url, source)
        token = os.environ.get("RAYSLEUTH_TOKEN", "").strip() or read_token_file(sd / TOKEN_FILE)
        client = cls(url, token)
        client.verify(source)
        return client

    def verify(self, source: str) -> None:
        """Ask the broker to prove it holds our token (no token sent); SleuthError if it cannot."""
        nonce = new_nonce()
        req = urllib.request.Request(f"{self.url}{HELLO_PATH}?nonce={nonce}", headers=self._agent())
        try:
            with OPENER.open(req, timeout=self.timeout) as resp:
                answer = json.load(resp)
        except urllib.error.HTTPError as exc:
            answer = {"status": exc.code}
        except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError) as exc:
            raise BrokerUnreachable(
                f"Cannot reach the broker at {self.url} (from {source}): {getattr(exc, 'reason', exc)}.",
                'Start it with "raysleuth broker" or pass --broker URL / set RAYSLEUTH_BROKER.',
            ) from None
        if not proven(self.token, nonce, answer):
            raise SleuthError(
                f"The process at {self.url} (from {source}) could not prove it holds your token, so "
                "the token was not sent to it: your token is wrong or stale, or that is not your broker.",
                "Check RAYSLEUTH_TOKEN and the state dir's token file; a broker that died leaves its "
                "address free for anyone: start one with `raysleuth broker`, or pass the right --broker URL.",
            )

    @staticmethod
    def _agent() -> dict:
        return {"User-Agent": f"raysleuth-cli (pid {os.getpid()})"}

    def request(self, method: str, path: str, body=None, timeout: float | None = None):
        """`timeout`: this request's bound (default the client's), for one the broker answers only
        once a long step is done (a rerun that starts a worker)."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.url + path,
            data=data,
            method=method,
            headers={
                "Authorization": f"Bearer {self.token}",
                "Content-Type": "application/json",
                **self._agent(),
            },
        )
        try:
            with OPENER.open(req, timeout=timeout or self.timeout) as resp:
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

    def events(self, names=None, timeout: float = 60.0):
        """(event, data) pairs from the broker's event stream (`/v1/stream`), those in `names`
        (all when None), until the stream ends or stays silent for `timeout` s (TimeoutError)."""
        req = urllib.request.Request(
            self.url + "/v1/stream",
            headers={"Authorization": f"Bearer {self.token}", "Accept": "text/event-stream", **self._agent()},
        )
        with OPENER.open(req, timeout=timeout) as resp:
            event, data = None, []
            for raw in resp:
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                if line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:"):
                    data.append(line[5:].strip())
                elif not line:
                    if event and data and (names is None or event in names):
                        yield event, json.loads("\n".join(data))
                    event, data = None, []

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
        self,
        path: str,
        breakpoints: list[dict],
        root: str | None = None,
        owner: str | None = None,
        force: bool = False,
    ) -> dict:
        """Replace `owner`'s breakpoints in `path` (absent: the broker's default owner, `api`);
        `force`: send code the broker would refuse as unbounded (#37)."""
        body: dict = {"path": path, "breakpoints": breakpoints}
        if force:
            body["force"] = True
        if owner:
            body["owner"] = owner
        if root:
            body["root"] = root
        return self.put("/v1/breakpoints", body)

    def breakpoints(self) -> list[dict]:
        return self.get("/v1/breakpoints")


def _checked(conn: http.client.HTTPConnection) -> None:
    """After connect, before a byte of the request: the peer must be a broker process of ours."""
    try:
        host = f"[{conn.host}]" if ":" in conn.host else conn.host
        check_broker_peer(conn.sock, f"{host}:{conn.port}")
    except SleuthError:
        conn.close()
        raise


class CheckedHTTPConnection(http.client.HTTPConnection):
    """http.client's connection to the broker, its peer checked on each (re)connect; urllib's
    opener below uses it, a keep-alive client (bench/registry_scale.py) may too."""

    def connect(self) -> None:
        super().connect()
        _checked(self)


class _CheckedHTTPS(http.client.HTTPSConnection):
    def connect(self) -> None:  # the TLS handshake comes first: it carries no token
        super().connect()
        _checked(self)


class _HTTPHandler(urllib.request.HTTPHandler):
    def http_open(self, req):
        return self.do_open(CheckedHTTPConnection, req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def https_open(self, req):
        return self.do_open(_CheckedHTTPS, req, context=self._context)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None  # the broker never redirects: the 3xx is the answer, and no header goes on


OPENER = urllib.request.build_opener(
    urllib.request.ProxyHandler({}), _HTTPHandler, _HTTPSHandler, _NoRedirect
)
"""urllib's opener for the broker: each connection's peer checked, no proxy, no redirect."""


def check_url(url: str, source: str) -> None:
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname
    except ValueError:  # "http://[::1": an unclosed bracket, a bad port
        parts, host = None, None
    if parts is None or parts.scheme not in ("http", "https") or not host:
        raise SleuthError(
            f"{one_line(repr(url))} (from {source}) is not a broker URL.",
            "Give one like http://127.0.0.1:8765.",
        )


def read_broker_file(sd: Path) -> dict:
    """The state dir's broker.json, refused unless it is a plain file of ours that others cannot
    write, and reported stale when the broker that wrote it is gone."""
    path = sd / BROKER_FILE
    try:
        st = path.lstat()
    except FileNotFoundError:
        raise BrokerUnreachable(
            f"No broker found: {path} does not exist.",
            "Start one with `raysleuth broker` (on the Ray head node), or pass --broker URL"
            " / set RAYSLEUTH_BROKER.",
        ) from None
    except OSError as exc:
        raise SleuthError(f"Cannot read {path} ({exc.strerror}).", "Pass --state-dir DIR.") from None
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        raise SleuthError(
            f"{path} is not a plain file of yours that only you can write "
            f"({stat.filemode(st.st_mode)}, uid {st.st_uid}): it may have been planted.",
            "Delete it and start the broker again (`raysleuth broker`).",
        )
    try:
        info = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise SleuthError(
            f"{path} is not valid JSON ({exc}).", "Remove it and start the broker again."
        ) from None
    if not isinstance(info, dict) or not isinstance(info.get("http"), str):
        raise SleuthError(
            f'{path} does not describe a broker (it needs an "http" address).',
            "Remove it and start the broker again (`raysleuth broker`).",
        )
    pid = info.get("pid")
    if isinstance(pid, int) and pid > 0 and not _alive(pid):
        raise BrokerUnreachable(
            f"The broker of {path} is gone (pid {pid}).",
            "Start one with `raysleuth broker`: it replaces the stale file.",
        )
    return info


def read_token_file(path: Path) -> str:
    """The token file: a plain file of ours that only we can read (never through a link)."""
    hint = "Set RAYSLEUTH_TOKEN, or run as the user who started the broker."
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        what = "is a symbolic link" if exc.errno == errno.ELOOP else f"cannot be read ({exc.strerror})"
        raise SleuthError(f"The broker token file {path} {what}.", hint) from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise SleuthError(
                f"The broker token file {path} ({stat.filemode(st.st_mode)}, uid {st.st_uid}) is not "
                "a file only you can read.",
                f"Delete it and restart the broker (a new token is made), or `chmod 600 {path}`.",
            )
        token = f.read(4096).decode("utf-8", "replace").strip()
    if not token:
        raise SleuthError(
            f"The broker token file {path} is empty.", "Restart the broker: it writes a new one."
        )
    return token


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's process: alive (the proof decides)
    return True
