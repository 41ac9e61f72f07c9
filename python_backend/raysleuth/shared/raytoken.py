"""Ray's token auth, as Ray 2.60 itself finds and decides it, for the broker, the demo and doctor.

Where Ray finds the token (its C++ `AuthenticationTokenLoader`, read in ray/_raylet.so and tried
here): `RAY_AUTH_TOKEN` (stripped; empty means unset), else the file `RAY_AUTH_TOKEN_PATH` names
(stripped; set but unreadable or empty is an error, no `~` expansion), else `$HOME/.ray/auth_token`
(empty or missing: no token).

When Ray's client sends it: only in `RAY_AUTH_MODE=token`. Ray turns that on by itself for a new
`ray.init()` cluster (it writes the token file if there is none), for `ray start --head` when a
token already exists, and for `ray.init(address="auto")` when a token exists; never for an explicit
address (the broker's `--address`). So the broker asks the cluster's GCS up front, with one cheap
RPC and no token, whether it needs one, and sets `RAY_AUTH_MODE` to match before `ray.init`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from raysleuth.shared.errors import SleuthError

MODE_ENV = "RAY_AUTH_MODE"
TOKEN_ENV = "RAY_AUTH_TOKEN"
PATH_ENV = "RAY_AUTH_TOKEN_PATH"
PROBE_TIMEOUT_S = 5.0
"""How long the up-front question to the GCS may take (it answers in about 2 ms)."""

FIX_HINT = (
    "Give the broker the cluster's token (`ray get-auth-token` prints it on the head node): put it "
    "in ~/.ray/auth_token of the user who runs the broker, or set RAY_AUTH_TOKEN (or "
    "RAY_AUTH_TOKEN_PATH=FILE) in its environment."
)


@dataclass(frozen=True)
class RayToken:
    value: str
    source: str
    """Where it was found: `RAY_AUTH_TOKEN`, `RAY_AUTH_TOKEN_PATH (FILE)` or the default file."""
    file: Path | None = None
    """The file it was read from (None: RAY_AUTH_TOKEN)."""

    def header(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.value}"}


def default_token_path() -> Path:
    return Path(os.environ.get("HOME") or Path.home()) / ".ray" / "auth_token"


def find_token(env=None) -> RayToken | None:
    """Ray's token for this process, from where Ray looks, in Ray's order; None if there is none.
    Raises SleuthError where Ray would fail too: RAY_AUTH_TOKEN_PATH names no readable token."""
    env = os.environ if env is None else env
    value = (env.get(TOKEN_ENV) or "").strip()
    if value:
        return RayToken(value, TOKEN_ENV)
    named = env.get(PATH_ENV)
    if named:
        try:
            value = Path(named).read_text(errors="replace").strip()
        except OSError as exc:
            raise SleuthError(
                f"{PATH_ENV}={named} names no readable token file: {exc.strerror or exc}", FIX_HINT
            ) from None
        if not value:
            raise SleuthError(f"{PATH_ENV}={named} names an empty file (no token in it)", FIX_HINT)
        return RayToken(value, f"{PATH_ENV} ({named})", Path(named))
    path = Path(env.get("HOME") or Path.home()) / ".ray" / "auth_token"
    try:
        value = path.read_text(errors="replace").strip()
    except OSError:
        return None
    return RayToken(value, str(path), path) if value else None


def auth_mode() -> str | None:
    """`RAY_AUTH_MODE` as set in this process (lower case), None where unset (Ray decides)."""
    mode = os.environ.get(MODE_ENV)
    return mode.strip().lower() if mode is not None else None


def probe_gcs(address: str, token: RayToken | None, timeout: float = PROBE_TIMEOUT_S) -> bool | None:
    """Whether the GCS at HOST:PORT accepts a call with `token` (None: without one): True if it
    does, False if it answers UNAUTHENTICATED, None if it cannot tell (no answer, TLS, no stubs)."""
    try:
        import grpc
        from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc
    except Exception:  # noqa: BLE001 - a Ray without its generated stubs: Ray decides alone
        return None
    metadata = (("authorization", f"Bearer {token.value}"),) if token else ()  # gRPC: lower case keys
    channel = grpc.insecure_channel(address)
    try:
        stub = gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel)
        stub.GetClusterId(gcs_service_pb2.GetClusterIdRequest(), timeout=timeout, metadata=metadata)
        return True
    except grpc.RpcError as exc:
        code = exc.code() if callable(getattr(exc, "code", None)) else None
        return False if code == grpc.StatusCode.UNAUTHENTICATED else None
    except Exception:  # noqa: BLE001 - a malformed address and the like: ray.init says what
        return None
    finally:
        channel.close()


def resolve_address(target: str) -> str | None:
    """HOST:PORT of the GCS that `ray.init(address=target)` would reach, None if unknown here."""
    if "://" in target:
        return None  # Ray Client (ray://) or another scheme: no GCS to ask directly
    host, sep, port = target.rpartition(":")
    if sep and host and port.isdigit():
        return target  # as given: the address the user named (Ray may turn 127.0.0.1 into the host's)
    try:
        from ray._private.services import canonicalize_bootstrap_address

        return canonicalize_bootstrap_address(target)
    except Exception:  # noqa: BLE001 - no cluster found: ray.init says so in its own words
        return None


def set_mode(mode: str) -> None:
    """Set Ray's auth mode for this process (and its children) before `ray.init`, as Ray does."""
    os.environ[MODE_ENV] = mode
    try:
        from ray._raylet import AuthenticationTokenLoader, Config  # type: ignore[attr-defined]

        Config.initialize("")  # Ray caches its config: re-read RAY_AUTH_MODE, as Ray's own switch does
        AuthenticationTokenLoader.instance().reset_cache()
    except Exception:  # noqa: BLE001 - a Ray without these reads the variable at ray.init
        pass


def prepare(target: str) -> str:
    """Before `ray.init(address=target)`: ask the cluster whether it needs Ray's token, find it the
    way Ray does and set RAY_AUTH_MODE to match. Returns a line saying what was decided; raises
    SleuthError (one line + hint) when the cluster needs a token this process cannot give."""
    address = resolve_address(target)
    if address is None:
        return "Ray's auth: not asked (no GCS address here); Ray decides"
    open_door = probe_gcs(address, None)
    mode = auth_mode()
    if open_door is None:
        return f"Ray's auth: the GCS at {address} did not say; Ray decides (RAY_AUTH_MODE={mode})"
    if open_door:
        if mode is None:
            set_mode("disabled")  # Ray would turn token mode on for "auto" wherever a token exists
        return f"Ray's auth: off at {address}"
    if mode is not None and mode != "token":
        raise SleuthError(
            f"Ray at {address} uses token auth, but {MODE_ENV}={os.environ[MODE_ENV]} in this process",
            f"Unset {MODE_ENV} (the broker then finds Ray's token by itself) or set it to token. " + FIX_HINT,
        )
    token = find_token()
    if token is None:
        raise SleuthError(
            f"Ray at {address} uses token auth and no token was found here ({TOKEN_ENV}, "
            f"{PATH_ENV}, {default_token_path()})",
            FIX_HINT,
        )
    if probe_gcs(address, token) is False:
        raise SleuthError(f"Ray at {address} refused the token from {token.source}", FIX_HINT)
    set_mode("token")
    return f"Ray's auth: token auth on at {address}; token from {token.source}"


def is_auth_failure(exc: BaseException) -> bool:
    """Whether `exc` (or what caused it) is Ray refusing, or missing, its auth token."""
    seen = 0
    cur: BaseException | None = exc
    while cur is not None and seen < 8:
        text = str(cur)
        if type(cur).__name__ == "AuthenticationError" or "InvalidAuthToken" in text:
            return True
        if "Token authentication is enabled but" in text:
            return True
        cur = cur.__cause__ or cur.__context__
        seen += 1
    return False


def auth_failure(target: str, exc: BaseException) -> SleuthError:
    """The one-line error for a `ray.init` that Ray's token auth refused."""
    mode = auth_mode()
    try:
        token = find_token()
        where = f"the token from {token.source}" if token else "no token (none found)"
    except SleuthError as err:
        where = err.message
    return SleuthError(
        f"Cannot connect to Ray at {target}: Ray's token auth refused the broker "
        f"({MODE_ENV}={mode}, {where})",
        FIX_HINT,
    )


def http_headers() -> dict[str, str]:
    """`Authorization: Bearer` for Ray's dashboard while this process is in token mode, else {}."""
    if auth_mode() != "token":
        return {}
    try:
        token = find_token()
    except SleuthError:
        return {}
    return token.header() if token else {}


def describe() -> tuple[str, str, str | None]:
    """(status, detail, hint) of Ray's auth as this process uses it, for doctor."""
    mode = auth_mode()
    if mode != "token":
        return "ok", f"Ray's token auth is off for this cluster ({MODE_ENV}={mode})", None
    try:
        token = find_token()
    except SleuthError as err:
        return "fail", err.message, FIX_HINT
    if token is None:
        return (
            "fail",
            f"Ray's token auth is on but no token was found (also not in {default_token_path()})",
            FIX_HINT,
        )
    detail = f"Ray's token auth is on; the broker sends the token from {token.source}"
    try:
        bits = token.file.stat().st_mode & 0o777 if token.file else 0
    except OSError:
        bits = 0
    if bits & 0o077:
        return (
            "warn",
            f"{detail}, a file other users may read (mode {bits:04o}, as Ray writes it)",
            f"chmod 600 {token.file}: whoever reads Ray's token can run code on the cluster.",
        )
    return "ok", detail, None
