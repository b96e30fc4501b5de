"""Network partitions between the processes of one test, on the loopback interface the stack
already uses: no server changes its address, certificate or configuration.

A *group* is a cgroup (v2) this test makes; a process started inside it, and every process it
forks, belongs to it, and so does every socket they open. An *endpoint* is a group, a set of
listening ports, or both (a server started in a group). Each connection is marked at its first
packet with the group that opened it (``CONNMARK``); a fault then matches a connection by that
mark, its direction and the port it was opened to, so a rule touches only connections between
the endpoints this test made, never another test's or worker's. Faults are iptables rules (the
nf_tables backend) in chains of this test's own, removed on close.

Why not network namespaces and veth pairs: every server of the stack binds 127.0.0.1 and its
certificate names 127.0.0.1; moving them to addresses of their own would change the very
configuration under test. Why not a TCP proxy: Kafka's clients and nodes reconnect to the
advertised address, so a proxy would need a listener per (client, node) pair. Latency needs
``sch_netem``, which this kernel lacks: a slow link here is a bandwidth limit (a policer).
"""

from __future__ import annotations

import contextlib
import os
import random
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.require import cannot_run

#: The cgroup v2 hierarchy (pure v2, or the ``unified`` one of a hybrid layout).
CGROUP_ROOTS = (Path("/sys/fs/cgroup/unified"), Path("/sys/fs/cgroup"))
#: The largest packet without data a TCP peer that receives in order sends: IPv4 (20 bytes), TCP
#: (20), timestamps (12) and one SACK block (12).
BARE_ACK_MAX_BYTES = 64
#: The connection-mark bits the groups of all tests share: 7 bits of test, 8 of group.
MARK_MASK = 0x7FFF0000


def _cgroup2_root() -> Path:
    for root in CGROUP_ROOTS:
        if (root / "cgroup.procs").exists() and (root / "cgroup.subtree_control").exists():
            return root
    cannot_run("no cgroup v2 hierarchy is mounted")
    raise AssertionError("unreachable")


def _iptables(*arguments: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["iptables", "-w", *arguments], capture_output=True, text=True, check=check
    )


@dataclass
class Endpoint:
    """One side of a link: the processes of a group, the ports a server listens on, or both."""

    name: str
    ports: tuple[int, ...] = ()
    mark: int | None = None  # set for a group: the connections its processes open
    directory: Path | None = None
    cgroup_root: Path | None = None

    @contextlib.contextmanager
    def joined(self) -> Iterator[None]:
        """This process inside the group while the block runs: what it starts there (a
        server, a service, with all their children) stays in the group. Sockets this process
        opened before keep their own group."""
        if self.directory is None or self.cgroup_root is None:
            raise ValueError(f"{self.name} is a set of ports, not a group")
        own = Path("/proc/self/cgroup").read_text().splitlines()
        back = next(line.split("::", 1)[1] for line in own if line.startswith("0::"))
        (self.directory / "cgroup.procs").write_text(str(os.getpid()))
        try:
            yield
        finally:
            (self.cgroup_root / back.lstrip("/") / "cgroup.procs").write_text(str(os.getpid()))


@dataclass
class Network:
    """The groups and faults of one test. Close it (or use :func:`network`) to remove them."""

    cgroup_root: Path
    root: Path
    test_id: int
    endpoints: list[Endpoint] = field(default_factory=list)
    faults: list[str] = field(default_factory=list)

    @property
    def chain(self) -> str:
        return f"MDS-PART-{self.test_id}"

    @property
    def fault_chain(self) -> str:
        return f"MDS-FAULT-{self.test_id}"

    def group(self, name: str, ports: tuple[int, ...] = ()) -> Endpoint:
        """A new group (a cgroup of this test) whose processes listen on ``ports``, if any."""
        index = len(self.endpoints) + 1
        mark = (self.test_id << 24) | (index << 16)
        directory = self.root / name
        directory.mkdir()
        path = str(directory.relative_to(self.cgroup_root))
        _iptables(
            "-I", self.chain, "1", "-m", "conntrack", "--ctstate", "NEW", "-m", "cgroup",
            "--path", path, "-j", "CONNMARK", "--set-xmark", f"{mark:#x}/{MARK_MASK:#x}",
        )  # fmt: skip
        endpoint = Endpoint(name, ports, mark, directory, self.cgroup_root)
        self.endpoints.append(endpoint)
        return endpoint

    def server(self, name: str, ports: tuple[int, ...]) -> Endpoint:
        """A server outside this test's groups (the stack's), known by its ports."""
        endpoint = Endpoint(name, ports)
        self.endpoints.append(endpoint)
        return endpoint

    # ----------------------------------------------------------------------------- faults
    def _matches(self, source: Endpoint, target: Endpoint) -> list[list[str]]:
        """iptables matches for every packet ``source`` sends to ``target``: on connections
        ``source`` opened to a port of ``target``, and answers on connections ``target``
        opened to a port of ``source``."""
        matches = []
        for opener, answered, direction in (
            (source, target, "ORIGINAL"),
            (target, source, "REPLY"),
        ):
            if opener.mark is None:
                continue
            for port in answered.ports:
                matches.append(
                    [
                        "-m", "connmark", "--mark", f"{opener.mark:#x}/{MARK_MASK:#x}",
                        "-m", "conntrack", "--ctdir", direction, "--ctorigdstport", str(port),
                    ]
                )  # fmt: skip
        if not matches:
            raise ValueError(f"nothing links {source.name} to {target.name}: no group, no port")
        return matches

    def _drop(self, source: Endpoint, target: Endpoint, *extra: str) -> None:
        for match in self._matches(source, target):
            _iptables("-A", self.fault_chain, "-p", "tcp", *match, *extra, "-j", "DROP")
        self.faults.append(f"{source.name}->{target.name} {' '.join(extra) or 'cut'}")

    def cut(self, a: Endpoint, b: Endpoint, *, one_way: bool = False) -> None:
        """No packet from ``a`` reaches ``b``; nor from ``b`` to ``a`` unless ``one_way``."""
        self._drop(a, b)
        if not one_way:
            self._drop(b, a)

    def answers_lost(self, server: Endpoint, client: Endpoint, after_bytes: int) -> None:
        """Once ``client`` has sent ``after_bytes`` on a connection to ``server`` (past the TLS
        handshake, into a request), no data ``server`` sends on it arrives: the request is
        received whole and acted on, its answer lost. TCP's bare acknowledgements still pass
        (an answer is lost, not the request), so a request larger than a window arrives too. A
        request sent again on a new connection meets the same fate: the zombie write, as often
        as it is retried."""
        self._drop(
            server, client, "-m", "connbytes", "--connbytes", f"{after_bytes}:",
            "--connbytes-dir", "original", "--connbytes-mode", "bytes",
            "-m", "length", "--length", f"{BARE_ACK_MAX_BYTES + 1}:65535",
        )  # fmt: skip

    def lossy(self, a: Endpoint, b: Endpoint, probability: float) -> None:
        """Each packet from ``a`` to ``b`` is lost with ``probability`` (one way)."""
        self._drop(a, b, "-m", "statistic", "--mode", "random", "--probability", f"{probability}")

    def slow(self, a: Endpoint, b: Endpoint, kbytes_per_s: int) -> None:
        """The link carries at most ``kbytes_per_s`` (KiB) each way: what is over it is dropped, as
        a policer does, and TCP slows down to it."""
        for source, target in ((a, b), (b, a)):
            name = f"mds{self.test_id}-{len(self.faults)}"
            self._drop(
                source, target, "-m", "hashlimit", "--hashlimit-above", f"{kbytes_per_s}kb/s",
                "--hashlimit-burst", f"{kbytes_per_s}kb", "--hashlimit-name", name,
            )  # fmt: skip

    def heal(self) -> None:
        """Every fault removed; the groups stay."""
        _iptables("-F", self.fault_chain)
        self.faults.clear()

    @contextlib.contextmanager
    def flapping(
        self, a: Endpoint, b: Endpoint, rng: random.Random, period_s: tuple[float, float]
    ) -> Iterator[None]:
        """The link between ``a`` and ``b`` goes down and up at random intervals within
        ``period_s`` while the block runs; healed after it."""
        stop = threading.Event()

        def flap() -> None:
            while not stop.is_set():
                self.cut(a, b)
                if stop.wait(rng.uniform(*period_s)):
                    break
                self.heal()
                stop.wait(rng.uniform(*period_s))

        thread = threading.Thread(target=flap, name="flapping", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
            self.heal()

    def dropped_packets(self) -> int:
        """Packets the current faults dropped (a fault that drops nothing proves nothing)."""
        out = _iptables("-L", self.fault_chain, "-v", "-n", "-x").stdout.splitlines()[2:]
        return sum(int(line.split()[0]) for line in out if line.strip())

    # ----------------------------------------------------------------------------- lifetime
    def remove_chains(self) -> None:
        _iptables("-D", "OUTPUT", "-o", "lo", "-j", self.chain, check=False)
        for chain in (self.chain, self.fault_chain):
            _iptables("-F", chain, check=False)
            _iptables("-X", chain, check=False)

    def close(self) -> None:
        self.remove_chains()
        for endpoint in self.endpoints:
            if endpoint.directory is not None:
                _evacuate(endpoint.directory, self.cgroup_root)
                endpoint.directory.rmdir()
        self.root.rmdir()


def _evacuate(directory: Path, to: Path) -> None:
    """Move what still runs in a group (a server the test left) to ``to``: a cgroup with
    processes cannot be removed."""
    for pid in (directory / "cgroup.procs").read_text().split():
        with contextlib.suppress(OSError):
            (to / "cgroup.procs").write_text(pid)


@contextlib.contextmanager
def network() -> Iterator[Network]:
    """A :class:`Network` for one test, removed afterwards whatever happens."""
    if os.geteuid() != 0:
        cannot_run("partitions need root (cgroups and iptables)")
    if _iptables("-L", "OUTPUT", "-n", check=False).returncode != 0:
        cannot_run("iptables cannot list the filter table here")
    cgroup_root = _cgroup2_root()
    # byte counts per connection, for answers_lost (connections opened from now on)
    Path("/proc/sys/net/netfilter/nf_conntrack_acct").write_text("1")
    base = cgroup_root / "mds-partitions"
    base.mkdir(exist_ok=True)
    net = Network(cgroup_root, base, 0)
    # a test id no other running test holds (workers run side by side): its directory's
    # creation is the claim
    for test_id in random.sample(range(1, 0x80), 0x7F):
        with contextlib.suppress(FileExistsError):
            (base / str(test_id)).mkdir()
            net = Network(cgroup_root, base / str(test_id), test_id)
            break
    else:
        raise AssertionError(f"every test id under {base} is taken: stale groups of killed runs?")
    try:
        net.remove_chains()  # a killed run's, whose id this test now holds
        _iptables("-N", net.chain)
        _iptables("-N", net.fault_chain)
        _iptables("-A", net.chain, "-j", net.fault_chain)
        _iptables("-I", "OUTPUT", "1", "-o", "lo", "-j", net.chain)
        yield net
    finally:
        net.close()
