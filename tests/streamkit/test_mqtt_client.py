"""The buffered paho client's coalesced writes: every queued byte leaves once, in order,
whatever the socket accepts per call (partial sends, would-block); and its close after a
DISCONNECT, which must not throw away what the broker has not read yet. Both on plain TCP and
on TLS (real loopback TLS connections with the launcher's certificates). And its keepalive,
which must not drop a broker that answers late because it is talking."""

from __future__ import annotations

import random
import select
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable

import paho.mqtt.client as mqtt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from paho.mqtt.enums import _ConnectionState

from stacktools.stack import certs
from stacktools.stack.settings import Settings
from streamkit.mqtt_client import BufferedClient, linger_close


class ChokingSocket:
    """Accepts a random number of bytes per send, sometimes none (would block)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.sent = bytearray()
        self.calls = 0

    def close(self) -> None:
        pass

    def send(self, data: bytes) -> int:
        self.calls += 1
        if self.rng.random() < 0.2:
            raise BlockingIOError
        n = self.rng.randint(1, len(data))
        self.sent += data[:n]
        return n


def client_with(sock: ChokingSocket) -> BufferedClient:
    client = BufferedClient(mqtt.CallbackAPIVersion.VERSION2, client_id="t", protocol=mqtt.MQTTv311)
    client._sock = sock  # type: ignore[assignment]  # a stand-in: only close() and send()
    client._thread = object()  # type: ignore[assignment]  # "threaded": queueing does not write by itself
    return client


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.large_base_example])
@given(
    st.lists(
        st.tuples(st.sampled_from(["puback", "qos1", "qos0"]), st.binary(min_size=1, max_size=40)),
        min_size=1,
        max_size=40,
    ),
    st.randoms(use_true_random=False),
)
def test_queued_packets_leave_whole_and_in_order(
    packets: list[tuple[str, bytes]], rng: random.Random
) -> None:
    sock = ChokingSocket(rng)
    client = client_with(sock)
    published: list[int] = []
    client.on_publish = lambda _c, _u, mid, _r, _p: published.append(mid)
    expected = b""
    for mid, (kind, body) in enumerate(packets, start=1):
        command = mqtt.PUBACK if kind == "puback" else mqtt.PUBLISH
        qos = 0 if kind == "qos0" else 1
        info = mqtt.MQTTMessageInfo(mid) if command == mqtt.PUBLISH else None
        client._packet_queue(command, body, mid, qos, info)
        expected += body
    for _ in range(10_000):
        if not client._out_packet:
            break
        client._packet_write()
    assert bytes(sock.sent) == expected
    # QoS 0 publishes still get paho's after-write callback, once each
    assert published == [mid for mid, (kind, _b) in enumerate(packets, start=1) if kind == "qos0"]


def test_a_run_of_acks_goes_out_in_one_send() -> None:
    sock = ChokingSocket(random.Random(0))
    sock.rng = type(
        "AlwaysAll", (), {"random": lambda self: 1.0, "randint": lambda self, a, b: b}
    )()
    client = client_with(sock)
    for mid in range(1, 501):
        client._send_puback(mid)
    client._packet_write()
    assert sock.calls == 1 and len(sock.sent) == 500 * 4


def connected_pair() -> tuple[socket.socket, socket.socket]:
    """(broker side, client side) of a loopback TCP connection."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        broker, _ = server.accept()
    return broker, client


UNREAD = b"P" * 64 * 1024  # PUBLISHes the broker sent that the client never read
ACKS = b"\x40\x02\x00\x01" * 1000  # PUBACKs the client sent that the broker has not read yet


def test_a_plain_close_with_unread_input_resets_the_connection_under_the_peers_unread_bytes() -> (
    None
):
    """The failure linger_close prevents: unread bytes make close() send RST, so the broker's
    next write fails while our PUBACKs still wait in its buffer; Mosquitto, writing a flood
    to us, drops the connection there and never reads them (it redelivers those messages)."""
    broker, client = connected_pair()
    broker.sendall(UNREAD)
    client.sendall(ACKS)
    client.close()
    with pytest.raises((ConnectionResetError, BrokenPipeError)):
        for _ in range(100):  # the first write may still be taken; the reset is there at once
            broker.send(UNREAD)
    broker.close()


def test_a_lingering_close_lets_the_peer_read_everything_before_the_connection_ends() -> None:
    broker, client = connected_pair()
    broker.sendall(UNREAD)
    client.sendall(ACKS)
    received = bytearray()

    # Mosquitto: writes and reads up to our FIN, then closes
    def broker_reads_then_closes() -> None:
        broker.sendall(UNREAD)  # taken and thrown away by the lingering close, no reset
        while chunk := broker.recv(65536):
            received.extend(chunk)
        broker.close()

    reader = threading.Thread(target=broker_reads_then_closes)
    reader.start()
    client.setblocking(False)  # as paho keeps it
    assert linger_close(client, 10)
    client.close()
    reader.join(10)
    assert bytes(received) == ACKS


# ----------------------------------------------------------------------------- over TLS
@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> certs.TlsFiles:
    run_dir = tmp_path_factory.mktemp("tls")
    return certs.ensure(Settings.from_sources({"STACK_RUN_DIR": str(run_dir)}))


def tls_pair(files: certs.TlsFiles) -> tuple[ssl.SSLSocket, ssl.SSLSocket]:
    """(broker side, client side) of a loopback TLS connection, the client verifying the broker."""
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(files.server_cert, files.server_key)
    client_context = ssl.create_default_context(cafile=str(files.ca))
    broker, client = connected_pair()
    handshake = threading.Thread(
        target=lambda: accepted.append(server_context.wrap_socket(broker, server_side=True))
    )
    accepted: list[ssl.SSLSocket] = []
    handshake.start()
    tls_client = client_context.wrap_socket(client, server_hostname="127.0.0.1")
    handshake.join(10)
    return accepted[0], tls_client


def test_a_lingering_close_over_tls_lets_the_peer_read_everything(
    tls_files: certs.TlsFiles,
) -> None:
    """SSLSocket.shutdown leaves TLS (no close_notify) and sends FIN behind our last record; the
    broker reads every record before it, and our reads after it discard its records unread."""
    broker, client = tls_pair(tls_files)
    broker.sendall(UNREAD)
    client.sendall(ACKS)
    received = bytearray()

    def broker_reads_then_closes() -> None:
        broker.sendall(UNREAD)
        while chunk := broker.recv(65536):  # a FIN without close_notify reads as the end here
            received.extend(chunk)
        broker.close()

    reader = threading.Thread(target=broker_reads_then_closes)
    reader.start()
    client.setblocking(False)
    assert linger_close(client, 10)
    client.close()
    reader.join(10)
    assert bytes(received) == ACKS


def test_a_close_notify_cannot_be_waited_for_while_the_broker_still_sends(
    tls_files: certs.TlsFiles,
) -> None:
    """Why linger_close sends no close_notify: after ours, OpenSSL refuses the broker's records
    that are still coming (under a flood they are), so waiting for its close_notify fails."""
    broker, client = tls_pair(tls_files)
    broker.sendall(UNREAD)
    client.setblocking(False)
    with pytest.raises(ssl.SSLError, match="APPLICATION_DATA_AFTER_CLOSE_NOTIFY"):
        for _ in range(100):
            try:
                client.unwrap()
            except ssl.SSLWantReadError:
                select.select([client], [], [], 1)
    client.close()
    broker.close()


def test_coalesced_writes_over_tls_survive_would_block_and_reads_come_whole(
    tls_files: certs.TlsFiles,
) -> None:
    """The buffered client on a TLS socket: a run of packets far larger than the socket buffers
    is written across many would-blocks (OpenSSL's WANT_WRITE, retried with the same bytes in
    front, as OpenSSL requires), arriving whole and in order; the read buffer returns the
    broker's bytes exactly, in the small pieces paho asks for."""
    broker, sock = tls_pair(tls_files)
    # fixed small buffers: the kernel's autotuning could otherwise grow them past everything
    # written, and then no write would ever block
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 32 * 1024)
    broker.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 * 1024)
    sock.setblocking(False)
    client = BufferedClient(mqtt.CallbackAPIVersion.VERSION2, client_id="t", protocol=mqtt.MQTTv311)
    client._sock = sock
    client._ssl = True  # as tls_set_context makes it: reads take every record there is
    client._thread = object()  # type: ignore[assignment]  # queueing does not write by itself
    rng = random.Random(3)
    bodies = [bytes([0x32]) + rng.randbytes(rng.randint(10, 2000)) for _ in range(4000)]
    for mid, body in enumerate(bodies, start=1):
        client._packet_queue(mqtt.PUBLISH, body, mid, 1, mqtt.MQTTMessageInfo(mid))
    expected = b"".join(bodies)
    blocked = 0
    received = bytearray()
    reader_started = threading.Event()

    def slow_broker() -> None:
        reader_started.wait(10)
        while len(received) < len(expected):
            received.extend(broker.recv(16384))

    reader = threading.Thread(target=slow_broker)
    reader.start()
    while client._out_packet:
        if client._packet_write() == mqtt.MQTTErrorCode.MQTT_ERR_AGAIN:
            blocked += 1
            reader_started.set()
            select.select([], [sock], [], 1)
    reader_started.set()
    reader.join(30)
    assert bytes(received) == expected
    assert blocked > 0, "the writes never blocked: the test did not test the retry"

    # many small records, as Mosquitto writes its PUBACKs (one record per packet)
    sent = rng.randbytes(100_000)
    for start in range(0, len(sent), 4):
        broker.sendall(sent[start : start + 4])
    got = bytearray()
    while len(got) < len(sent):
        try:
            got += client._sock_recv(rng.choice([1, 2, 5, 1000]))
        except BlockingIOError:
            select.select([sock], [], [], 1)
    assert bytes(got) == sent
    sock.close()
    broker.close()


def publish_packet(mid: int) -> bytes:
    """A QoS 1 PUBLISH on topic ``t`` (what a broker writes ahead of a late PINGRESP)."""
    body = b"\x00\x01t" + mid.to_bytes(2, "big") + b"%d" % mid
    return bytes([0x32, len(body)]) + body


def client_on_connection(
    keepalive_s: int,
) -> tuple[socket.socket, socket.socket, BufferedClient]:
    """(broker side, client side, client) of a loopback connection, the client in paho's
    connected state as after a CONNACK, its socket non-blocking as paho keeps it."""
    broker, sock = connected_pair()
    sock.setblocking(False)
    client = BufferedClient(mqtt.CallbackAPIVersion.VERSION2, client_id="t", protocol=mqtt.MQTTv311)
    client._sock = sock
    client._state = _ConnectionState.MQTT_CS_CONNECTED
    client._keepalive = keepalive_s
    return broker, sock, client


def run_talking_broker(
    loop_misc: Callable[[BufferedClient], mqtt.MQTTErrorCode], talk_s: float
) -> tuple[list[float], int]:
    """A client with a 1 s keepalive sends a PINGREQ that is never answered; the broker sends a
    PUBLISH every 0.1 s for ``talk_s``, then falls silent. The client's PUBACKs keep its side
    busy, as the bridge's do, so paho sends no second PINGREQ. Returns when the client dropped the
    connection (seconds after the PINGREQ; empty if it did not within talk_s + 3 s) and how
    many PUBLISHes it read."""
    broker, sock, client = client_on_connection(keepalive_s=1)
    dropped: list[float] = []
    read: list[bytes | bytearray] = []
    pinged = time.monotonic()
    client.on_message = lambda _c, _u, message: read.append(message.payload)
    client.on_disconnect = lambda *_a: dropped.append(time.monotonic() - pinged)
    client._send_pingreq()
    stop = threading.Event()

    def broker_talks() -> None:
        mid = 1
        while not stop.wait(0.1) and time.monotonic() - pinged < talk_s:
            try:
                broker.sendall(publish_packet(mid))
                broker.recv(4096)  # the PUBACKs
            except OSError:  # the client dropped the connection
                return
            mid += 1

    talker = threading.Thread(target=broker_talks)
    talker.start()
    try:
        while not dropped and time.monotonic() - pinged < talk_s + 3:
            select.select([sock], [], [], 0.05)
            client.loop_read()
            if client._sock is not None:
                loop_misc(client)
    finally:
        stop.set()
        talker.join(5)
        broker.close()
        sock.close()
    return dropped, len(read)


def test_a_broker_that_keeps_talking_is_not_dropped_for_a_late_pingresp() -> None:
    """The bridge's case: the PINGRESP queues behind an in-flight window the bridge reads at
    Kafka's pace. paho alone drops the connection one keepalive after its PINGREQ although
    bytes keep coming; the buffered client counts those bytes as the answer, and still drops a
    broker that falls silent, one keepalive after its last bytes."""
    dropped, _ = run_talking_broker(mqtt.Client.loop_misc, talk_s=3)
    assert dropped and dropped[0] < 2, f"paho's own rule kept the connection: {dropped}"

    dropped, read = run_talking_broker(BufferedClient.loop_misc, talk_s=3)
    assert read >= 20, f"the broker's PUBLISHes were not read ({read})"
    assert dropped, "a broker silent for longer than the keepalive was never dropped"
    assert 3.5 <= dropped[0] < 5.5, f"dropped {dropped[0]:.1f} s after the PINGREQ"


def test_a_connection_lost_while_a_callback_waits_ends_the_wait_instead_of_hanging() -> None:
    """The bridge's backpressure wait runs in paho's message callback. The broker resets the
    connection meanwhile (it dropped a bridge stopped for longer than 1.5 keepalives): the
    callback's write fails, keep_alive_in_callback says so instead of reporting the loss from
    inside the callback (paho's on_disconnect would wait for the callback's own lock: the
    network thread hung, the process alive and idle), and paho reports it once the callback
    has returned."""
    broker, sock, client = client_on_connection(keepalive_s=30)
    client.manual_ack_set(True)
    alive: list[bool] = []
    disconnected = threading.Event()

    def wait_in_callback(c: mqtt.Client, _u: object, message: mqtt.MQTTMessage) -> None:
        # the broker resets the connection (SO_LINGER 0: RST), then the callback waits
        broker.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        broker.close()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            c.ack(message.mid, message.qos)  # a PUBACK to write into the dead connection
            alive.append(client.keep_alive_in_callback())
            if not alive[-1]:
                return
            time.sleep(0.05)

    client.on_message = wait_in_callback
    client.on_disconnect = lambda *_a: disconnected.set()
    broker.sendall(publish_packet(1))
    reader = threading.Thread(target=client.loop_read, daemon=True)
    reader.start()
    reader.join(10)
    try:
        assert not reader.is_alive(), "the network thread hung in the callback"
        assert alive and alive[-1] is False, (
            f"the wait never learnt the connection was gone: {alive}"
        )
        if not disconnected.is_set():
            client.loop_read()  # the next read meets the reset
        assert disconnected.is_set(), "paho never reported the lost connection"
    finally:
        sock.close()


# ---------------------------------------------------------------------- a broker out of reach
def fake_broker(port: int, connack_code: int, ready: threading.Event) -> threading.Thread:
    """An MQTT 3.1.1 broker of one connection on ``port``: it reads the CONNECT and answers
    CONNACK with ``connack_code`` (0: accepted, 5: not authorised)."""

    def serve() -> None:
        with socket.create_server(("127.0.0.1", port)) as server:
            ready.set()
            conn, _ = server.accept()
            with conn:
                conn.recv(1024)
                conn.sendall(bytes([0x20, 0x02, 0x00, connack_code]))
                time.sleep(1)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


def plain_settings(port: int, host: str = "127.0.0.1") -> Settings:
    return Settings.from_sources(
        environ={"MQTT_HOST": host, "MQTT_PORT": str(port), "TLS": "false", "MQTT_PASSWORD": "x"}
    )


def test_a_broker_that_comes_up_late_is_reached_within_the_patience() -> None:
    """Refused at first (nothing listens), then a broker that accepts: connected."""
    from streamkit.mqtt_client import connect_patiently, make_client

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ready = threading.Event()
    threading.Timer(1.5, lambda: fake_broker(port, 0, ready)).start()
    settings = plain_settings(port)
    client = make_client(settings, "patient", mqtt5=False)
    started = time.monotonic()
    connect_patiently(client, settings, patience_s=20)
    assert ready.is_set() and time.monotonic() - started >= 1.0
    client.loop_stop()


def test_a_broker_s_refusal_is_raised_at_once_and_an_unknown_name_after_the_patience() -> None:
    from streamkit.errors import MqttConnectError
    from streamkit.mqtt_client import connect_patiently, make_client

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ready = threading.Event()
    fake_broker(port, 5, ready)
    assert ready.wait(5)
    settings = plain_settings(port)
    started = time.monotonic()
    with pytest.raises(MqttConnectError) as refused:
        connect_patiently(make_client(settings, "refused", mqtt5=False), settings, patience_s=20)
    assert refused.value.reason is not None and time.monotonic() - started < 5
    nowhere = plain_settings(port, host="no-such-broker.invalid")
    started = time.monotonic()
    with pytest.raises(OSError):
        connect_patiently(make_client(nowhere, "nowhere", mqtt5=False), nowhere, patience_s=2)
    assert 2 <= time.monotonic() - started < 10
