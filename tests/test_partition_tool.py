"""The partition tool (tests/support/partition.py) on real TCP connections: an echo server and
its clients started in groups of their own, each fault observed from both ends, and nothing
outside the groups touched."""

from __future__ import annotations

import contextlib
import random
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from tests.support.partition import Endpoint, Network, network
from tests.support.ports import free_ports

pytestmark = pytest.mark.partition

#: An echo server that answers each line and logs what it received.
ECHO = """
import socket, sys, threading
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", int(sys.argv[1])))
server.listen()
def serve(connection):
    with connection, connection.makefile("rwb") as stream:
        for line in stream:
            print("got", line.decode().strip(), flush=True)
            stream.write(line)
            stream.flush()
while True:
    threading.Thread(target=serve, args=(server.accept()[0],), daemon=True).start()
"""
#: A client that sends each line of its stdin and prints the next answer, or "timeout" (a line
#: "?" sends nothing and only reads the next answer).
CLIENT = """
import socket, sys
connection = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=float(sys.argv[2]))
print("connected", flush=True)
buffer = b""
for line in sys.stdin:
    if line != "?\\n":
        connection.sendall(line.encode())
    try:
        while b"\\n" not in buffer:
            chunk = connection.recv(65536)
            if not chunk:
                raise SystemExit("closed")
            buffer += chunk
        answer, buffer = buffer.split(b"\\n", 1)
        print("answer", answer.decode(), flush=True)
    except TimeoutError:
        print("timeout", flush=True)
"""


@pytest.fixture
def net() -> Iterator[Network]:
    with network() as made:
        yield made


@pytest.fixture
def echo(net: Network, tmp_path) -> Iterator[tuple[Endpoint, subprocess.Popen, object]]:
    (port,) = free_ports(1)
    server = net.group("server", (port,))
    log = (tmp_path / "echo.log").open("w+")
    with server.joined():
        process = subprocess.Popen([sys.executable, "-c", ECHO, str(port)], stdout=log)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    yield server, process, log
    process.kill()
    process.wait()


class Client:
    def __init__(self, group: Endpoint, port: int, timeout_s: float) -> None:
        with group.joined():
            self.process = subprocess.Popen(
                [sys.executable, "-c", CLIENT, str(port), str(timeout_s)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
        assert self.process.stdout is not None and self.process.stdin is not None
        self.stdin, self.stdout = self.process.stdin, self.process.stdout

    def ask(self, text: str) -> str:
        self.stdin.write(text + "\n")
        self.stdin.flush()
        return self.stdout.readline().strip()

    def close(self) -> None:
        self.process.kill()
        self.process.wait()


@contextlib.contextmanager
def connected(
    net: Network, server: Endpoint, timeout_s: float, name: str = "client"
) -> Iterator[tuple[Endpoint, Client]]:
    """A client in a new group ``name``, connected to ``server``; killed afterwards."""
    group = net.group(name)
    client = Client(group, server.ports[0], timeout_s)
    try:
        assert client.stdout.readline().strip() == "connected"
        yield group, client
    finally:
        client.close()


def received(log) -> list[str]:
    log.seek(0)
    return [line.split(" ", 1)[1].strip() for line in log if line.startswith("got")]


def wait_received(log, text: str) -> None:
    """Until the server has logged ``text`` (a hang detector: it arrives in milliseconds)."""
    deadline = time.monotonic() + 10
    while text not in received(log) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert text in received(log), "the request did not arrive"


def test_a_cut_stops_both_ways_only_between_its_groups_and_heals(net: Network, echo) -> None:
    server, _, log = echo
    with (
        connected(net, server, 1.0) as (group, client),
        connected(net, server, 1.0, "bystander") as (_, bystander),
    ):
        assert client.ask("a") == "answer a"
        net.cut(group, server)
        assert client.ask("b") == "timeout"
        assert "b" not in received(log), "the request crossed a cut"
        assert bystander.ask("c") == "answer c", "a cut touched another group"
        with socket.create_connection(("127.0.0.1", server.ports[0]), timeout=1) as outside:
            outside.sendall(b"d\n")
            assert outside.recv(10) == b"d\n", "a cut touched a process outside the groups"
        assert net.dropped_packets() > 0
        net.heal()
        # TCP retransmits what the cut held: the late request and its answer arrive
        assert client.ask("?") == "answer b"
        assert received(log)[-1] == "b"
        assert client.ask("e") == "answer e"


def test_a_one_way_cut_delivers_the_request_and_loses_the_answer(net: Network, echo) -> None:
    server, _, log = echo
    with connected(net, server, 1.0) as (group, client):
        net.cut(server, group, one_way=True)
        assert client.ask("late") == "timeout"
        wait_received(log, "late")
        net.heal()
        assert client.ask("?") == "answer late"


def test_a_new_connection_across_a_cut_is_never_made(net: Network, echo) -> None:
    server, _, _ = echo
    group = net.group("client")
    net.cut(group, server, one_way=True)
    client = Client(group, server.ports[0], 1.0)
    try:
        assert client.process.wait(30) != 0, "connected across a cut"
    finally:
        client.close()


def test_a_lossy_and_a_flapping_link_lose_packets_and_no_data(net: Network, echo) -> None:
    server, _, log = echo
    # TCP's retransmission timer starts at 200 ms and doubles: it outgrows 60 s only after
    # eight losses in a row of the same segment or its acknowledgement (p = 0.36 each)
    with connected(net, server, 60.0) as (group, client):
        net.lossy(group, server, 0.2)
        net.lossy(server, group, 0.2)
        answers = [client.ask(f"lossy-{n}") for n in range(20)]
        assert answers == [f"answer lossy-{n}" for n in range(20)]
        assert net.dropped_packets() > 0
        net.heal()
        with net.flapping(group, server, random.Random(1), (0.05, 0.3)):
            answers = [client.ask(f"flap-{n}") for n in range(20)]
        assert answers == [f"answer flap-{n}" for n in range(20)]
        assert received(log) == [
            *(f"lossy-{n}" for n in range(20)),
            *(f"flap-{n}" for n in range(20)),
        ]


def test_a_slow_link_carries_no_more_than_its_rate(net: Network, echo) -> None:
    server, _, _ = echo
    kbytes_per_s, lines = 64, 24
    line = "x" * 16_000
    with connected(net, server, 60.0) as (group, client):
        net.slow(group, server, kbytes_per_s)
        started = time.monotonic()
        for _ in range(lines):
            assert client.ask(line) == f"answer {line}"
        took = time.monotonic() - started
    # each way carries every line (iptables' kb is 1,024 bytes), and the policer lets a burst of
    # one second's worth through; its byte accounting is coarse (credits per jiffy), so half
    # that time is asked for: unpoliced, the loopback carries it in milliseconds
    least = (lines * len(line) / 1024 - kbytes_per_s) / kbytes_per_s / 2
    assert took >= least, f"{took:.1f} s for what takes at least {least:.1f} s at the rate"


def test_answers_lost_after_a_request_let_it_in_and_its_answer_not(net: Network, echo) -> None:
    server, _, log = echo
    with connected(net, server, 1.0) as (group, client):
        net.answers_lost(server, group, 4096)
        assert client.ask("small") == "answer small", "answers lost before the byte count"
        big = "y" * 1_000_000  # larger than a TCP window: the bare acknowledgements pass
        assert client.ask(big) == "timeout"
        wait_received(log, big)
        net.heal()
        assert client.ask("?") == f"answer {big}"
