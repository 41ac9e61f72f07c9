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

TCP_TABLES = ("/proc/net/tcp6", "/proc/net/tcp")
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


def _row_addr(field: str) -> tuple[bytes, int]:
    """`0100007F:1F90` (IPv4) or 32 hex digits and a port (IPv6), each 32-bit word in host order."""
    hexaddr, hexport = field.split(":")
    raw = bytes.fromhex(hexaddr)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    if len(words) == 4:
        words = b"\0" * 10 + b"\xff\xff" + words
    return words, int(hexport, 16)


def _find_row(local: tuple[bytes, int], remote: tuple[bytes, int]) -> tuple[int, int] | None:
    """(uid, inode) of the established socket whose own address is `local` and peer `remote`."""
    for table in TCP_TABLES:
        try:
            with open(table, encoding="ascii") as f:
                next(f, None)
                for line in f:
                    cols = line.split()
                    if len(cols) < 10 or cols[3] != ESTABLISHED:
                        continue
                    if _row_addr(cols[1]) == local and _row_addr(cols[2]) == remote:
                        return int(cols[7]), int(cols[9])
        except (OSError, ValueError):
            continue
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
