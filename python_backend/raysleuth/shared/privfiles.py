"""Files only their owner can read: every file Ray Sleuth writes is 0600 and every folder 0700
(crash records hold the locals of crashed frames, where passwords and API keys live), and a
state dir that another user owns or can write is refused, since a file planted there (a
`broker.json`) would steer the CLI and the editor.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from raysleuth.shared.errors import SleuthError

FILE_MODE = 0o600
DIR_MODE = 0o700


def write_private(path: Path | str, text: str | bytes) -> None:
    """Write `text` (or bytes) to `path` atomically, created 0600 (never readable by others, not
    even for a moment); the folder must exist."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, FILE_MODE)
    try:
        with os.fdopen(fd, "wb" if isinstance(text, bytes) else "w") as f:
            f.write(text)
        os.chmod(tmp, FILE_MODE)  # an old tmp file of ours may have had another mode
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def private_dir(path: Path | str) -> Path:
    """`path` (and missing parents) made as 0700; an existing one is left as it is."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    return path


def open_private_append(path: Path | str):
    """A binary append handle on `path`, created 0600 (a log)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, FILE_MODE)
    os.fchmod(fd, FILE_MODE)
    return os.fdopen(fd, "ab")


def check_state_dir(path: Path) -> None:
    """Refuse a state dir another user owns or can write (SleuthError with a hint)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise SleuthError(
            f"Cannot use the state dir {path}: {exc.strerror}.", "Pass --state-dir DIR."
        ) from exc
    if not stat.S_ISDIR(st.st_mode):
        raise SleuthError(
            f"The state dir {path} is not a folder.", "Pass --state-dir with a folder of yours."
        )
    if st.st_uid != os.getuid():
        raise SleuthError(
            f"The state dir {path} belongs to uid {st.st_uid}, not to you (uid {os.getuid()}).",
            "Use a state dir of your own: --state-dir DIR or RAYSLEUTH_STATE_DIR.",
        )
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise SleuthError(
            f"Others can write the state dir {path} ({stat.filemode(st.st_mode)}): a broker.json "
            "planted there would steer Ray Sleuth to another process.",
            f"Run `chmod 700 {path}` after checking that nothing in it was planted, or use a new "
            "--state-dir.",
        )


def secure_state_dir(path: Path) -> list[str]:
    """Make the state dir 0700 and everything in it 0600 (folders 0700), whatever existed
    before; returns what was changed (`path: 0644 -> 0600`). Refuses as `check_state_dir`."""
    check_state_dir(path)
    try:
        private_dir(path)
    except OSError as exc:
        raise SleuthError(
            f"Cannot make the state dir {path}: {exc.strerror}.",
            "Pass --state-dir (or RAYSLEUTH_STATE_DIR) a folder you can create.",
        ) from None
    fixed = []
    for root, dirs, files in os.walk(path, followlinks=False):
        for name, mode in [(root, DIR_MODE)] + [(os.path.join(root, f), FILE_MODE) for f in files]:
            try:
                st = os.lstat(name)
                if stat.S_ISLNK(st.st_mode) or st.st_uid != os.getuid():
                    continue
                old = stat.S_IMODE(st.st_mode)
                if old & ~mode:
                    os.chmod(name, old & mode)
                    fixed.append(f"{name}: {old:o} -> {old & mode:o}")
            except OSError:
                continue
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(root, d))]
    return fixed
