"""Files only their owner can read, reached through no link: every file Ray Sleuth writes is 0600
and every folder 0700 (crash records hold the locals of crashed frames, where passwords and API
keys live), and a state dir that is a link, that another user owns or can write, or that sits in
a folder another user can change is refused, since a file planted there (a `broker.json`) would
steer the CLI and the editor, and a link would make the broker chmod and write someone else's
folder.

Everything that changes a file works on a descriptor opened with O_NOFOLLOW (mkdirat, openat,
fstat, fchmod): no path is checked and then used, so a link swapped in between is never followed.
Nothing is chmod'ed that is not this user's.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path

from raysleuth.shared.errors import SleuthError

FILE_MODE = 0o600
DIR_MODE = 0o700
MAX_DEPTH = 16
"""How deep `secure_state_dir` walks (the state dir has one level of folders)."""

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_NOFOLLOW = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
STATE_DIR_HINT = "Use a state dir of your own: --state-dir DIR or RAYSLEUTH_STATE_DIR."


class NotOursError(SleuthError, OSError):
    """A folder or file that is a link or another user's, where one of ours must be: a
    SleuthError (the CLI prints it) that callers writing files also catch as an OSError."""


def create_exclusive(path: Path | str, append: bool = True) -> int:
    """A new file at `path`, 0600, opened for writing: O_CREAT|O_EXCL|O_NOFOLLOW, so a file or
    link someone put there first is never opened (FileExistsError)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | (os.O_APPEND if append else 0)
    return os.open(path, flags, FILE_MODE)


def write_private(path: Path | str, text: str | bytes) -> None:
    """Write `text` (or bytes) to `path` atomically: a new 0600 file of a random name (created
    exclusively) renamed over `path`; the folder must exist."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = create_exclusive(tmp, append=False)
    try:
        with os.fdopen(fd, "wb" if isinstance(text, bytes) else "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def private_dir(path: Path | str) -> Path:
    """`path` (and missing parents) made as 0700, each created folder opened without following a
    link and checked to be ours; an existing `path` must be a folder of ours, not a link
    (NotOursError otherwise; OSError where it cannot be made). An existing one keeps its mode."""
    path = Path(path)
    os.close(_open_dir_chain(path))
    return path


def _refuse_dir(path: Path, why: str) -> NotOursError:
    return NotOursError(f"Cannot use {path}: {why}.", STATE_DIR_HINT)


def _open_dir_chain(path: Path) -> int:
    """An O_DIRECTORY descriptor of `path`, opened without following a link at `path` or at any
    folder made here (mkdirat/openat from the deepest existing parent); each is checked ours."""
    path = Path(os.path.abspath(path))
    missing: list[str] = []
    top = path
    while not os.path.lexists(top) and top != top.parent:
        missing.append(top.name)
        top = top.parent
    try:  # an existing parent is opened as it is: judged by check_state_dir, not here
        fd = os.open(top, _DIR_FLAGS | (os.O_NOFOLLOW if top == path else 0))
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.islink(top):
            raise _refuse_dir(top, "it is a symbolic link") from None
        raise
    try:
        if top == path:
            _check_ours(fd, path)
        for name in reversed(missing):
            try:
                os.mkdir(name, DIR_MODE, dir_fd=fd)
            except FileExistsError:
                pass  # made meanwhile: checked below like any other
            top = top / name
            try:
                child = os.open(name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                why = "it is a symbolic link" if exc.errno == errno.ELOOP else exc.strerror
                raise _refuse_dir(top, why or str(exc)) from None
            os.close(fd)
            fd = child
            _check_ours(fd, top)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check_ours(fd: int, path: Path) -> None:
    st = os.fstat(fd)
    if not stat.S_ISDIR(st.st_mode):
        raise _refuse_dir(path, "it is not a folder")
    if st.st_uid != os.getuid():
        raise _refuse_dir(path, f"it belongs to uid {st.st_uid}, not to you (uid {os.getuid()})")


def open_private_append(path: Path | str):
    """A binary append handle on `path`, created 0600 (a log); an existing one must be a plain
    file of ours (it is made 0600 through its descriptor), never a link."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | _NOFOLLOW, FILE_MODE)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid():
            raise NotOursError(
                f"{path} is not a plain file of yours (uid {st.st_uid}).",
                "Delete it (it is made again) or use another --state-dir.",
            )
        os.fchmod(fd, FILE_MODE)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "ab")


def _show(path: object) -> str:
    """A path for a message: control characters escaped (a link's target is anyone's text)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(path))


def _unsafe_folder(path: str, st: os.stat_result) -> str | None:
    """Why another user could swap what `path` (a folder, or a link to one) holds, else None."""
    uid = os.getuid()
    if st.st_uid not in (0, uid):
        kind = "link" if stat.S_ISLNK(st.st_mode) else "folder"
        return f"the {kind} {_show(path)} above it belongs to uid {st.st_uid}"
    if stat.S_ISDIR(st.st_mode) and st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        if not st.st_mode & stat.S_ISVTX:  # sticky (/tmp): others cannot rename our entries
            return f"others can write the folder {_show(path)} above it ({stat.filemode(st.st_mode)})"
    return None


def _check_parents(path: Path) -> None:
    """Every folder above the state dir, as written and as it really is, belongs to us or root
    and is not writable by others (unless sticky), and every link on the way is ours or root's:
    else another user could put a link or their own folder where the state dir is."""
    parents = [str(p) for p in path.parents]
    existing = next((p for p in parents if os.path.lexists(p)), "/")
    real = Path(os.path.realpath(existing))
    for p in dict.fromkeys(parents + [str(real)] + [str(q) for q in real.parents]):
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise SleuthError(
                f"Cannot use the state dir {path}: {exc.strerror} ({p}).", STATE_DIR_HINT
            ) from None
        why = _unsafe_folder(p, st)
        if why:
            raise SleuthError(
                f"Cannot use the state dir {path}: {why}, who could put a link there.",
                "Use a state dir under a folder only you (and root) can change, e.g. the "
                "default ~/.raysleuth: --state-dir DIR or RAYSLEUTH_STATE_DIR.",
            )


def check_state_dir(path: Path) -> None:
    """Refuse a state dir that is a link, that another user owns or can write, or whose parents
    another user can change (SleuthError with a hint). A missing one is fine (it is made)."""
    path = Path(os.path.abspath(path))
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        _check_parents(path)
        return
    except OSError as exc:
        raise SleuthError(
            f"Cannot use the state dir {path}: {exc.strerror}.", "Pass --state-dir DIR."
        ) from exc
    if stat.S_ISLNK(st.st_mode):
        raise SleuthError(
            f"The state dir {path} is a symbolic link (to {_show(os.readlink(path))}); Ray Sleuth "
            "follows no link, since the folder it points at would be made private and written.",
            f"Pass the folder itself (--state-dir {_show(os.path.realpath(path))}) if it is yours, "
            "or a new --state-dir.",
        )
    if not stat.S_ISDIR(st.st_mode):
        raise SleuthError(
            f"The state dir {path} is not a folder.", "Pass --state-dir with a folder of yours."
        )
    if st.st_uid != os.getuid():
        raise SleuthError(
            f"The state dir {path} belongs to uid {st.st_uid}, not to you (uid {os.getuid()}).",
            STATE_DIR_HINT,
        )
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise SleuthError(
            f"Others can write the state dir {path} ({stat.filemode(st.st_mode)}): a broker.json "
            "planted there would steer Ray Sleuth to another process.",
            f"Run `chmod 700 {path}` after checking that nothing in it was planted, or use a new "
            "--state-dir.",
        )
    _check_parents(path)


def secure_state_dir(path: Path) -> list[str]:
    """Make the state dir 0700 and every file of ours in it 0600 (folders 0700), whatever existed
    before; returns what was changed (`path: 644 -> 600`). Refuses as `check_state_dir`. Works
    on descriptors only (openat with O_NOFOLLOW, fstat, fchmod): links are skipped, never
    followed, and what another user owns is left alone."""
    check_state_dir(path)
    try:
        fd = _open_dir_chain(path)
    except NotOursError:
        raise
    except OSError as exc:
        raise SleuthError(
            f"Cannot make the state dir {path}: {exc.strerror or exc}.",
            "Pass --state-dir (or RAYSLEUTH_STATE_DIR) a folder you can create.",
        ) from None
    fixed: list[str] = []
    try:
        _fix_tree(fd, str(path), fixed, 0)
    finally:
        os.close(fd)
    return fixed


def _fix_mode(fd: int, where: str, st: os.stat_result, allowed: int, fixed: list[str]) -> None:
    old = stat.S_IMODE(st.st_mode)
    if st.st_uid == os.getuid() and old & ~allowed:
        os.fchmod(fd, old & allowed)
        fixed.append(f"{where}: {old:o} -> {old & allowed:o}")


def _fix_tree(fd: int, where: str, fixed: list[str], depth: int) -> None:
    _fix_mode(fd, where, os.fstat(fd), DIR_MODE, fixed)
    if depth >= MAX_DEPTH:
        return
    with os.scandir(fd) as entries:
        names = [e.name for e in entries]
    for name in names:
        try:
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except OSError:
            continue
        if st.st_uid != os.getuid() or not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
            continue  # links, sockets, fifos, devices and others' files: left as they are
        if stat.S_ISREG(st.st_mode) and not stat.S_IMODE(st.st_mode) & ~FILE_MODE:
            continue  # nothing to fix: not even opened
        child = _open_same(fd, name, st)
        if child is None:
            continue
        try:
            if stat.S_ISDIR(st.st_mode):
                _fix_tree(child, os.path.join(where, name), fixed, depth + 1)
            else:
                _fix_mode(child, os.path.join(where, name), os.fstat(child), FILE_MODE, fixed)
        finally:
            os.close(child)


def _open_same(dir_fd: int, name: str, st: os.stat_result) -> int | None:
    """`name` in `dir_fd` opened without following a link, if it still is the `st` found (same
    inode, kind and owner); None where it changed or cannot be opened."""
    if stat.S_ISDIR(st.st_mode):
        modes = [_DIR_FLAGS]
    else:  # a file of ours we may not read (0200) but must still fix: write-only then
        modes = [os.O_RDONLY, os.O_WRONLY]
    fd = None
    for flags in modes:
        try:
            fd = os.open(name, flags | _NOFOLLOW, dir_fd=dir_fd)
            break
        except OSError:
            continue
    if fd is None:
        return None
    now = os.fstat(fd)
    same = (now.st_ino, now.st_dev, now.st_uid) == (st.st_ino, st.st_dev, st.st_uid)
    if not same or stat.S_IFMT(now.st_mode) != stat.S_IFMT(st.st_mode):
        os.close(fd)
        return None
    return fd
