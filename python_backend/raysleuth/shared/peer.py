"""Who is on the other end of a loopback TCP connection: the uid (and, where readable, the pid) of
the process that holds the peer socket, read from the kernel's tables (`/proc/net/tcp`, `tcp6`,
`/proc/<pid>/fd`). A client uses it to prove, before it sends the token, that the port it reached
belongs to a process of the token's owner (a relay another user runs on a stale port does not);
the broker uses it to name the local client in its audit log.

Linux only; elsewhere, or for an address that is not loopback, nothing can be proven (None).
"""

from __future__ import annotations

import ipaddress
import os
import socket
from dataclasses import dataclass

from raysleuth.shared.errors import SleuthError

ESTABLISHED = "01"


@dataclass(frozen=True)
class Peer:
    uid: int
    inode: int
    pid: int | None = None

    def describe(self) -> str:
        return f"uid {self.uid}" + (f", pid {self.pid}" if self.pid else "")


def is_loopback(host: str) -> bool:
    """Whether `host` (a literal address or `localhost`) is this machine's loopback."""
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        addr = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    mapped = getattr(addr, "ipv4_mapped", None)
    return (mapped or addr).is_loopback


def _packed(host: str, port: int) -> tuple[bytes, int]:
    """An address as 16 bytes (IPv4 as ::ffff:a.b.c.d) and its port, the key of a table row."""
    addr = ipaddress.ip_address(host.split("%", 1)[0])
    if isinstance(addr, ipaddress.IPv4Address):
        addr = ipaddress.IPv6Address(b"\0" * 10 + b"\xff\xff" + addr.packed)
    return addr.packed, port


def _row_fields(addr: tuple[bytes, int]) -> tuple[str, str]:
    """How the kernel's tables spell `addr` (16 bytes, port): in `tcp` (IPv4 only, else "") and in
    `tcp6`, the address as hex with each 32-bit word in host order, then the port."""
    raw, port = addr
    v6 = "".join(raw[i : i + 4][::-1].hex().upper() for i in range(0, 16, 4))
    v4 = raw[12:][::-1].hex().upper() if raw[:12] == b"\0" * 10 + b"\xff\xff" else ""
    tail = f":{port:04X}"
    return (v4 + tail if v4 else ""), v6 + tail


def _find_row(local: tuple[bytes, int], remote: tuple[bytes, int]) -> tuple[int, int] | None:
    """(uid, inode) of the established socket whose own address is `local` and peer `remote`;
    IPv4 peers are looked up in `tcp` first (a dual-stack listener's sockets sit in `tcp6`)."""
    (l4, l6), (r4, r6) = _row_fields(local), _row_fields(remote)
    tables = [("/proc/net/tcp", l4, r4)] if l4 and r4 else []
    tables.append(("/proc/net/tcp6", l6, r6))
    for table, want_local, want_remote in tables:
        try:
            with open(table, encoding="ascii") as f:
                text = f.read()
        except OSError:
            continue
        start = text.find(f" {want_local} {want_remote} {ESTABLISHED} ")
        if start < 0:
            continue
        cols = text[start : text.find("\n", start)].split()
        try:
            return int(cols[6]), int(cols[8])
        except (IndexError, ValueError):
            return None
    return None


def _pid_of(inode: int) -> int | None:
    """The process holding socket `inode`, where its fd table is readable (ours, or any as root)."""
    if not inode:
        return None
    want = f"socket:[{inode}]"
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            for fd in os.scandir(f"/proc/{entry.name}/fd"):
                if os.readlink(fd.path) == want:
                    return int(entry.name)
        except OSError:
            continue
    return None


def peer_of(sock: socket.socket, with_pid: bool = False) -> Peer | None:
    """The process on the other end of `sock`, a connected loopback TCP socket; None where the
    kernel's tables do not say (not Linux, not TCP, not loopback, the peer already gone)."""
    if sock.family not in (socket.AF_INET, socket.AF_INET6):
        return None
    try:
        here = sock.getsockname()
        there = sock.getpeername()
    except OSError:
        return None
    if not is_loopback(there[0]):
        return None
    row = _find_row(_packed(there[0], there[1]), _packed(here[0], here[1]))
    if row is None:
        return None
    uid, inode = row
    return Peer(uid, inode, _pid_of(inode) if with_pid else None)


def trusted_uids() -> frozenset[int]:
    """Whose sockets may receive our token: ours, and root's (who can read our files anyway)."""
    return frozenset({os.getuid(), 0})


def check_broker_peer(sock: socket.socket, where: str) -> None:
    """Raise SleuthError unless `sock` reaches a process of ours (or root's) on loopback. Called
    after connect, before the first byte is sent; a non-loopback peer is refused here too: the
    token goes to another machine only through a tunnel (ssh -L) whose local end is ours."""
    try:
        host = sock.getpeername()[0]
    except OSError as exc:
        raise SleuthError(f"The connection to {where} closed at once ({exc}).", None) from None
    if not is_loopback(host):
        raise SleuthError(
            f"{where} is not on this machine's loopback, so it cannot be proven to be your broker "
            "and the token was not sent.",
            "Reach a remote broker through a tunnel: `ssh -L 7311:127.0.0.1:7311 HEAD` and use "
            "http://127.0.0.1:7311 (docs/remote.md).",
        )
    peer = peer_of(sock)
    if peer is None:
        raise SleuthError(
            f"Cannot tell which process listens at {where} (no row in /proc/net/tcp), so the token "
            "was not sent.",
            "Ray Sleuth's clients need Linux's /proc to prove the broker is yours.",
        )
    if peer.uid not in trusted_uids():
        raise SleuthError(
            f"The process listening at {where} belongs to uid {peer.uid}, not to you (uid "
            f"{os.getuid()}): it is not your broker, so the token was not sent to it.",
            "A broker that died leaves its port free for anyone: start yours with "
            "`raysleuth broker`, or pass the right --broker URL.",
        )
