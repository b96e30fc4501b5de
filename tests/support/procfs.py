"""What /proc tells about the processes of this machine: their command lines, their process
trees and the TCP ports they listen on (IPv4 and IPv6, a JVM's v4-mapped sockets included).

Read directly, with no tool in between, so a test sees what any local user of the machine sees.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's st column


@dataclass(frozen=True)
class Listener:
    address: ipaddress.IPv4Address | ipaddress.IPv6Address
    port: int

    @property
    def loopback_v4(self) -> bool:
        """127.0.0.1 itself, also as a JVM's v4-mapped IPv6 socket (::ffff:127.0.0.1)."""
        address = self.address
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        return address == ipaddress.IPv4Address("127.0.0.1")

    def __str__(self) -> str:
        return f"{self.address}:{self.port}"


def pids() -> list[int]:
    return [int(entry.name) for entry in PROC.iterdir() if entry.name.isdigit()]


def cmdline(pid: int) -> bytes:
    """The raw command line (arguments separated by NUL); empty for a process that is gone or
    a kernel thread."""
    try:
        return (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return b""


def parent(pid: int) -> int | None:
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def descendants(root: int) -> set[int]:
    """``root`` and every process below it (children, grandchildren, ...)."""
    children: dict[int, list[int]] = {}
    for pid in pids():
        ppid = parent(pid)
        if ppid is not None:
            children.setdefault(ppid, []).append(pid)
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo += children.get(pid, [])
    return found


def _address(hex_address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """/proc/net/tcp{,6} print addresses as host-order 32-bit words in hex."""
    raw = bytes.fromhex(hex_address)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return ipaddress.ip_address(words)


def _listening_inodes() -> dict[int, Listener]:
    listeners: dict[int, Listener] = {}
    for table in ("tcp", "tcp6"):
        lines = (PROC / "net" / table).read_text().splitlines()[1:]
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], int(fields[9])
            if state == LISTEN:
                address, port = local.split(":")
                listeners[inode] = Listener(_address(address), int(port, 16))
    return listeners


def socket_inodes(pid: int) -> set[int]:
    inodes: set[int] = set()
    try:
        descriptors = list((PROC / str(pid) / "fd").iterdir())
    except OSError:
        return inodes
    for descriptor in descriptors:
        try:
            target = os.readlink(descriptor)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[len("socket:[") : -1]))
    return inodes


def listeners(pids_: set[int]) -> dict[int, list[Listener]]:
    """The TCP sockets each of ``pids_`` listens on (processes listening on none left out)."""
    table = _listening_inodes()
    found: dict[int, list[Listener]] = {}
    for pid in sorted(pids_):
        mine = sorted(
            (table[inode] for inode in socket_inodes(pid) if inode in table),
            key=lambda listener: listener.port,
        )
        if mine:
            found[pid] = mine
    return found


def describe(pid: int) -> str:
    """pid and the start of its command line, for messages."""
    text = cmdline(pid).replace(b"\0", b" ").decode("utf-8", "replace")
    return f"{pid} ({text[:160]})"
