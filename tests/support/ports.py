"""Free local ports for a stack of a test's own, beside any stack that is already up."""

from __future__ import annotations

import random
import socket


def _bindable(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def free_ports(count: int) -> list[int]:
    """Distinct free ports, each with port + 2 free too (InfluxDB's RPC port is its HTTP port +
    2)."""
    ports: list[int] = []
    while len(ports) < count:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        taken = {p + d for p in ports for d in (0, 2)}
        if _bindable(port + 2) and not {port, port + 2} & taken:
            ports.append(port)
    return ports


def spaced_free_ports(count: int, step: int = 2) -> int:
    """A base port with ``count`` ports ``step`` apart all free (a cluster's node N listens on
    base + step (N-1))."""
    for _ in range(200):
        base = random.randrange(20_000, 60_000)
        if all(_bindable(base + step * n) for n in range(count)):
            return base
    raise AssertionError(f"no {count} free ports {step} apart")
