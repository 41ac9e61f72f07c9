"""The broker's bearer token: created once per state dir, readable only by its owner."""

from __future__ import annotations

import errno
import hmac
import os
import secrets
import stat
from pathlib import Path

from raysleuth.shared.errors import SleuthError
from raysleuth.shared.paths import TOKEN_FILE
from raysleuth.shared.privfiles import private_dir, write_private

MIN_TOKEN_CHARS = 32
"""A token given by RAYSLEUTH_TOKEN: at least 128 bits even as hex."""


def load_or_create_token(state_dir: Path) -> tuple[str, Path]:
    """The token (RAYSLEUTH_TOKEN, else the state dir's token file, made if missing) and its file.

    The state dir must be a folder of ours, not a link (it is made 0700 if missing, folder by
    folder, without following a link). A token file that is a link, that others can read, or
    that another user owns is refused (SleuthError with a hint): the token guards code execution
    in every worker, and it may have leaked already. The file is read through one descriptor
    opened without following a link, so what was checked is what is read.
    """
    private_dir(state_dir)
    path = state_dir / TOKEN_FILE
    token = os.environ.get("RAYSLEUTH_TOKEN", "").strip()
    if token and len(token) < MIN_TOKEN_CHARS:
        raise SleuthError(
            f"RAYSLEUTH_TOKEN is {len(token)} characters: a token needs at least {MIN_TOKEN_CHARS}.",
            "Unset it (the broker makes one) or make one with "
            '`python -c "import secrets; print(secrets.token_urlsafe(32))"`.',
        )
    stored = _read_token_file(path)
    token = token or stored or secrets.token_urlsafe(32)
    write_private(path, token + "\n")
    return token, path


def _read_token_file(path: Path) -> str:
    """The token file's text ("" when there is none), refused as `load_or_create_token` says."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        return ""
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SleuthError(
                f"The broker's token file {path} is a symbolic link.",
                "A token file must be a plain file of yours: delete the link (a new token is made).",
            ) from None
        raise SleuthError(
            f"Cannot read the broker's token file {path}: {exc.strerror}.",
            "A token file must be a plain file of yours: delete it (a new token is made).",
        ) from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise SleuthError(
                f"The broker's token file {path} is not a plain file.",
                "A token file must be a plain file of yours: delete it (a new token is made).",
            )
        if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO) or st.st_uid != os.getuid():
            mode = stat.filemode(st.st_mode)
            raise SleuthError(
                f"The broker's token file {path} ({mode}, uid {st.st_uid}) can be read by others.",
                f"Anyone who read it can run code in every worker: delete it (a new token is made) "
                f"or, if it never left your hands, run `chmod 600 {path}`.",
            )
        return f.read(4096).decode("utf-8", "replace").strip()


def check_bearer(header: str | None, token: str) -> bool:
    """Whether an `Authorization` header carries exactly this token (constant-time compare)."""
    if not header:
        return False
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer":
        return False
    # surrogatepass: a header of any bytes (or a lone surrogate) is compared and refused, never an error
    given = value.strip().encode("utf-8", "surrogatepass")
    return hmac.compare_digest(given, token.encode())
