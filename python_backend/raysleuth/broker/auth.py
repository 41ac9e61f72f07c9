"""The broker's bearer token: created once per state dir, readable only by its owner."""

from __future__ import annotations

import hmac
import os
import secrets
import stat
from pathlib import Path

from raysleuth.errors import SleuthError
from raysleuth.paths import TOKEN_FILE


def load_or_create_token(state_dir: Path) -> tuple[str, Path]:
    """The token (RAYSLEUTH_TOKEN, else the state dir's token file, made if missing) and its file.

    A token file that others can read, or that another user owns, is refused (SleuthError with a
    hint): the token guards code execution in every worker, and it may have leaked already.
    """
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = state_dir / TOKEN_FILE
    token = os.environ.get("RAYSLEUTH_TOKEN", "").strip()
    if path.exists():
        st = path.stat()
        if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO) or st.st_uid != os.getuid():
            mode = stat.filemode(st.st_mode)
            raise SleuthError(
                f"The broker's token file {path} ({mode}, uid {st.st_uid}) can be read by others.",
                f"Anyone who read it can run code in every worker: delete it (a new token is made) "
                f"or, if it never left your hands, run `chmod 600 {path}`.",
            )
        if not token:
            token = path.read_text().strip()
    if not token:
        token = secrets.token_urlsafe(32)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
    return token, path


def check_bearer(header: str | None, token: str) -> bool:
    """Whether an `Authorization` header carries exactly this token (constant-time compare)."""
    if not header:
        return False
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(value.strip().encode(), token.encode())
