"""Mosquitto as the launcher configures it, on a real Mosquitto of the test's own (started by the
launcher: TLS on, a machine user per Thing, tiny queue bounds) next to the session's stack:

- TLS: a plaintext client, a client with an unknown CA and one reaching it under a name its
  certificate does not carry are refused, each with its specific failure; the stack's CA works;
- MQTT_MACHINE_IDENTITIES: ``stack machine-user`` makes users a running broker takes at once;
  machine A may publish to its own topic only (MQTT 5 PUBACK "Not authorized" elsewhere), the
  shared machine user is gone, and a row on A's topic that names B is a dead letter
  ``thing_mismatch`` of the real bridge;
- the queue bound: an offline persistent session keeps MQTT_MAX_QUEUED_MESSAGES messages, the
  first ones, and Mosquitto drops (and logs) the rest; back, it has at most
  MQTT_MAX_INFLIGHT_MESSAGES unacknowledged at a time;
- the password file: the launcher's line for a password and salt is ``mosquitto_passwd``'s.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import socket
import ssl
import stat
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest

from simulator.config import SimulatorSettings
from simulator.errors import MachineUserMissing
from simulator.publisher import MqttPublisher
from stacktools.harness.scrape import metric_sum, scrape_metrics
from stacktools.harness.services import service_process
from stacktools.harness.wiring import Wiring
from stacktools.stack import certs
from stacktools.stack.mqtt_users import machine_passwords, password_line
from stacktools.stack.settings import Settings
from streamkit.deadline import wait_until
from streamkit.kafka_io import read_to_end, wait_for_count
from streamkit.mqtt_client import MqttConnectError, connect, make_client
from streamkit.paths import REPO_ROOT, find_program
from streamkit.secret import Secret
from streamkit.wire import machine_topic, record_key
from tests.support.harness import wait_for_keys
from tests.support.messages import header_of
from tests.support.private_mosquitto import private_mosquitto, service_env
from tests.support.relay import RELAY_HOST, relay
from tests.support.server_checks import check_mqtt_auth, publish_reasons
from tests.support.waits import ONE_MESSAGE_S

QUEUED, INFLIGHT = 20, 5
PREFIX = "machines/ids"
T0 = 1_554_000_000_000


@pytest.fixture(scope="module")
def mosquitto(
    stack_settings: Settings, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Settings]:
    with private_mosquitto(
        stack_settings,
        tmp_path_factory.mktemp("mosquitto"),
        TLS="true",
        MQTT_MACHINE_IDENTITIES="true",
        MQTT_TOPIC_PREFIX=PREFIX,
        MQTT_MAX_QUEUED_MESSAGES=str(QUEUED),
        MQTT_MAX_INFLIGHT_MESSAGES=str(INFLIGHT),
    ) as settings:
        yield settings


def connected(settings: Settings, client_id: str = "", **kwargs: object) -> mqtt.Client:
    client = make_client(settings, client_id or f"t-{uuid.uuid4().hex[:8]}", **kwargs)  # type: ignore[arg-type]
    connect(client, settings, timeout_s=10)
    return client


def close(*clients: mqtt.Client) -> None:
    for client in clients:
        client.disconnect()
        client.loop_stop()


# ----------------------------------------------------------------------------- TLS
@pytest.mark.stack
def test_the_stacks_ca_works_and_the_connection_is_tls(mosquitto: Settings) -> None:
    check_mqtt_auth(mosquitto)  # publish, subscribe; anonymous and a wrong password refused
    client = connected(mosquitto)
    try:
        sock = client.socket()
        assert isinstance(sock, ssl.SSLSocket) and sock.version() in {"TLSv1.2", "TLSv1.3"}
    finally:
        close(client)
    # TLS 1.2 is still accepted (tls_version tlsv1.2 is the minimum, not the only version)
    context = ssl.create_default_context(cafile=str(mosquitto.ca_path))
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    with (
        socket.create_connection(("127.0.0.1", mosquitto.mqtt_port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        assert tls.version() == "TLSv1.2"
    conf = (mosquitto.run_dir / "mosquitto" / "mosquitto.conf").read_text()
    assert "tls_version tlsv1.2" in conf and conf.count("listener ") == 1


def watching(mosquitto: Settings) -> tuple[mqtt.Client, list[tuple[str, bytes]]]:
    """The admin subscribed to everything under the prefix, and what it receives."""
    received: list[tuple[str, bytes]] = []
    watcher = connected(mosquitto)
    subscribed = threading.Event()
    watcher.on_subscribe = lambda *_a: subscribed.set()
    watcher.on_message = lambda _c, _u, m: received.append((m.topic, bytes(m.payload)))
    watcher.subscribe(f"{PREFIX}/#", qos=1)
    assert subscribed.wait(ONE_MESSAGE_S)
    return watcher, received


@pytest.mark.stack
def test_a_plaintext_client_is_refused(mosquitto: Settings) -> None:
    plain = dataclasses.replace(mosquitto, tls=False)
    with pytest.raises(MqttConnectError, match="closed the connection before its CONNACK"):
        connect(make_client(plain), plain, timeout_s=10)
    # Below paho: an MQTT CONNECT in the clear gets no byte back, no CONNACK, only the end of
    # the connection (Mosquitto's TLS handshake fails on it).
    with socket.create_connection(("127.0.0.1", mosquitto.mqtt_port), timeout=10) as sock:
        sock.sendall(bytes([0x10, 13, 0, 4]) + b"MQTT" + bytes([4, 2, 0, 30, 0, 1]) + b"x")
        try:
            answer = sock.recv(100)
        except ConnectionResetError:
            answer = b""
        assert answer == b"", answer


@pytest.mark.stack
def test_a_client_with_another_ca_is_refused(mosquitto: Settings, tmp_path: Path) -> None:
    other = certs.ensure(Settings.from_sources({"STACK_RUN_DIR": str(tmp_path / "other")}))
    stranger = dataclasses.replace(mosquitto, tls_ca_file=str(other.ca))
    with pytest.raises(ssl.SSLCertVerificationError) as refused:
        connect(make_client(stranger), stranger, timeout_s=10)
    # the chain does not lead to the CA it trusts: not a name problem
    assert refused.value.verify_code in {19, 20}, refused.value  # self-signed in chain / no issuer
    assert "mismatch" not in str(refused.value)


@pytest.mark.stack
def test_a_client_reaching_it_under_another_name_is_refused(mosquitto: Settings) -> None:
    with relay(mosquitto.mqtt_port) as port:
        elsewhere = dataclasses.replace(mosquitto, mqtt_host=RELAY_HOST, mqtt_port=port)
        with pytest.raises(ssl.SSLCertVerificationError, match="IP address mismatch") as refused:
            connect(make_client(elsewhere), elsewhere, timeout_s=10)
        assert RELAY_HOST in str(refused.value)
        assert refused.value.verify_code == 64  # X509_V_ERR_IP_ADDRESS_MISMATCH


# ----------------------------------------------------------------------------- identities
def machine_user_command(mosquitto: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "STACK_RUN_DIR": str(mosquitto.run_dir),
        "MQTT_PORT": str(mosquitto.mqtt_port),
        "TLS": "true",
        "TLS_CA_FILE": str(mosquitto.ca_path),
        "MQTT_MACHINE_IDENTITIES": "true",
        "MQTT_TOPIC_PREFIX": PREFIX,
        "PYTHONPATH": str(REPO_ROOT),
    }
    return subprocess.run(
        [sys.executable, "-m", "stacktools.stack", "machine-user", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
    )


def as_machine(mosquitto: Settings, thing: str) -> Settings:
    return dataclasses.replace(
        mosquitto,
        mqtt_username=thing,
        mqtt_password=Secret(machine_passwords(mosquitto)[thing]),
    )


@pytest.mark.stack
def test_machine_users_publish_only_to_their_own_topic(mosquitto: Settings) -> None:
    odd = 'Fräse 3,a=b "x"'  # a valid Thing with the characters a line or a file might trip on
    made = machine_user_command(mosquitto, "A", "B", odd)
    assert made.returncode == 0, made.stderr
    assert "3 made" in made.stdout
    credentials = mosquitto.machine_credentials_path
    assert stat.S_IMODE(credentials.stat().st_mode) == 0o600
    assert set(json.loads(credentials.read_text())) >= {"A", "B", odd}
    for path in (mosquitto.run_dir / "mosquitto", mosquitto.run_dir / "data" / "mosquitto"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700, path
    passwd = mosquitto.run_dir / "mosquitto" / "passwd"
    assert stat.S_IMODE(passwd.stat().st_mode) == 0o600
    # again: nothing new, the passwords stay
    before = machine_passwords(mosquitto)
    again = machine_user_command(mosquitto, "A")
    assert again.returncode == 0 and "0 made, 1 had one" in again.stdout, again
    assert machine_passwords(mosquitto) == before
    refused = machine_user_command(mosquitto, "a:b")
    assert refused.returncode == 2 and "':'" in refused.stderr, refused

    watcher, received = watching(mosquitto)
    machine_a = connected(as_machine(mosquitto, "A"))
    machine_odd = connected(as_machine(mosquitto, odd))
    try:
        reasons = publish_reasons(
            machine_a,
            [
                (f"{PREFIX}/B", b"A as B"),
                (f"{PREFIX}/1/B", b"A as B, sharded"),
                (f"{PREFIX}/A/B", b"A as B, under A"),
                ("elsewhere/A", b"outside the prefix"),
                (f"{PREFIX}/A", b"A as A"),
                (f"{PREFIX}/1/A", b"A as A, sharded"),
            ],
        )
        assert reasons == ["Not authorized"] * 4 + ["Success"] * 2, reasons
        assert publish_reasons(machine_odd, [(f"{PREFIX}/{odd}", b"own")]) == ["Success"]
        wait_until(lambda: len(received) >= 3, ONE_MESSAGE_S, "the allowed messages")
        assert sorted(received) == sorted(
            [
                (f"{PREFIX}/A", b"A as A"),
                (f"{PREFIX}/1/A", b"A as A, sharded"),
                (f"{PREFIX}/{odd}", b"own"),
            ]
        )
    finally:
        close(watcher, machine_a, machine_odd)
    # the shared machine user is not in the broker with identities on
    shared = mosquitto.acting_as("mqtt", "machine")
    with pytest.raises(MqttConnectError) as gone:
        connect(make_client(shared), shared, timeout_s=10)
    assert gone.value.reason == "Not authorized", gone.value


@pytest.mark.stack
def test_a_row_naming_another_thing_is_a_dead_letter(
    stack_settings: Settings, mosquitto: Settings, tmp_path: Path
) -> None:
    assert machine_user_command(mosquitto, "A").returncode == 0
    lane = dataclasses.replace(Wiring.private(stack_settings, bridge_only=True), prefix=PREFIX)
    service = service_process(
        "mqtt_bridge", lane, tmp_path / "bridge.log", env=service_env(stack_settings, mosquitto)
    ).start()
    service.wait_logged('"bridge running"', 60)
    port = int(service.args[service.args.index("--metrics-port") + 1])
    machine_a = connected(as_machine(mosquitto, "A"))
    try:
        rows = [
            b'{"Thing": "B", "Timestamp": %d, "power": 1.5}' % T0,  # A speaking for B
            b'{"Thing": "A", "Timestamp": %d, "power": 2.5}' % (T0 + 1),
        ]
        assert publish_reasons(machine_a, [(f"{PREFIX}/A", row) for row in rows]) == [
            "Success",
            "Success",
        ]
        expected = {record_key("A", "power", T0 + 1)}
        assert wait_for_keys(stack_settings, lane.raw, expected, 60) == expected
        assert wait_for_count(stack_settings, lane.dlq, 1, 60) >= 1
        (letter,) = read_to_end(stack_settings, lane.dlq)
        assert letter.value() == rows[0]
        assert header_of(letter, "reason") == b"thing_mismatch"
        assert header_of(letter, "mqtt_topic") == f"{PREFIX}/A".encode()
        values = scrape_metrics(port)
        assert metric_sum(values, "bridge_dlq_total", 'reason="thing_mismatch"') == 1
        assert {m.key() for m in read_to_end(stack_settings, lane.raw)} == expected
    finally:
        close(machine_a)
        service.terminate()


@pytest.mark.stack
def test_the_simulator_logs_in_as_each_thing(mosquitto: Settings) -> None:
    assert machine_user_command(mosquitto, "S1", "S2").returncode == 0
    watcher, received = watching(mosquitto)
    # the simulator's own settings, from the environment it would be given
    environ = {
        **os.environ,
        **service_env(mosquitto, mosquitto),
        "STACK_RUN_DIR": str(mosquitto.run_dir),
    }
    publisher = MqttPublisher(SimulatorSettings.from_sources(environ), connections=4, shards=2)
    try:
        rows = [("S1", b"one"), ("S2", b"two"), ("S1", b"three")]
        for thing, payload in rows:
            publisher.publish(thing, payload)
        assert publisher.wait_all_acked(len(rows), ONE_MESSAGE_S)
        assert len(publisher.clients) == 2  # a connection per Thing, not --connections
        with pytest.raises(MachineUserMissing, match="machine-user"):
            publisher.publish("S3", b"no user")
        wait_until(lambda: len(received) >= len(rows), ONE_MESSAGE_S, "the rows")
        assert sorted(received) == sorted(
            (machine_topic(PREFIX, thing, 2), payload) for thing, payload in rows
        )
    finally:
        publisher.close()
        close(watcher)


# ----------------------------------------------------------------------------- queue bound
def away_with_a_backlog(mosquitto: Settings, name: str, count: int) -> tuple[str, str, list[bytes]]:
    """A persistent session that subscribed and left, and ``count`` messages published to it
    while it is away, each acknowledged to the publisher: (client id, topic, messages)."""
    client_id = f"{name}-{uuid.uuid4().hex[:8]}"
    topic = f"bound/{client_id}"
    subscriber = connected(mosquitto, client_id, persistent_session=True)
    subscribed = threading.Event()
    subscriber.on_subscribe = lambda *_a: subscribed.set()
    subscriber.subscribe(topic, qos=1)
    assert subscribed.wait(ONE_MESSAGE_S)
    close(subscriber)  # away, its session kept
    publisher = connected(mosquitto)
    try:
        sent = [b"%d" % n for n in range(count)]
        assert publish_reasons(publisher, [(topic, m) for m in sent]) == ["Success"] * len(sent)
    finally:
        close(publisher)
    return client_id, topic, sent


@pytest.mark.stack
def test_an_offline_session_keeps_the_bound_and_mosquitto_drops_the_rest(
    mosquitto: Settings,
) -> None:
    """What MQTT_MAX_QUEUED_MESSAGES means for the bridge's session: the first messages are
    kept, later ones are dropped while it is away, and the publisher is not told (its PUBACK
    is a success); Mosquitto logs that it drops."""
    client_id, topic, sent = away_with_a_backlog(mosquitto, "offline", 5 * QUEUED)
    received: list[bytes] = []
    back = make_client(mosquitto, client_id, persistent_session=True)
    back.on_message = lambda _c, _u, m: received.append(bytes(m.payload))
    connect(back, mosquitto, timeout_s=10)
    try:
        wait_until(lambda: len(received) >= QUEUED, ONE_MESSAGE_S, f"{QUEUED} kept messages")
        # nothing more comes: a marker published now arrives after the kept ones, at once
        marker = connected(mosquitto)
        publish_reasons(marker, [(topic, b"marker")])
        close(marker)
        wait_until(lambda: b"marker" in received, ONE_MESSAGE_S, "the marker")
        assert received == sent[:QUEUED] + [b"marker"], received
    finally:
        close(back)
    log = mosquitto.run_dir / "logs" / "mosquitto.log"
    wait_until(  # its log reaches the file when Mosquitto flushes it
        lambda: f"Outgoing messages are being dropped for client {client_id}" in log.read_text(),
        ONE_MESSAGE_S,
        "Mosquitto's log line about dropping",
    )


@pytest.mark.stack
def test_a_session_back_to_a_backlog_gets_only_the_in_flight_bound_unacknowledged(
    mosquitto: Settings,
) -> None:
    """What MQTT_MAX_INFLIGHT_MESSAGES means for the bridge coming back to a backlog: at most
    that many messages are unacknowledged at a time, however it acknowledges. Mosquitto before
    2.0.13 moved up to a whole window of queued messages into flight on every PUBACK: acking
    ACKED messages in order, it got INFLIGHT + ACKED * (INFLIGHT - 1) here, and the bridge
    under a flood got its whole backlog in flight (and again after a lost connection)."""
    acked = 3
    client_id, topic, sent = away_with_a_backlog(mosquitto, "inflight", QUEUED)
    received: list[bytes] = []

    def take(client: mqtt.Client, _u: object, message: mqtt.MQTTMessage) -> None:
        received.append(bytes(message.payload))
        if len(received) <= acked:  # in arrival order, as the bridge acknowledges
            client.ack(message.mid, message.qos)

    back = make_client(mosquitto, client_id, persistent_session=True)
    back.manual_ack_set(True)
    back.on_message = take
    connect(back, mosquitto, timeout_s=10)
    try:
        wait_until(lambda: len(received) >= INFLIGHT + acked, ONE_MESSAGE_S, "the window")
        # more would come at once: a round trip to the broker (a SUBACK) passes them all
        resubscribed = threading.Event()
        back.on_subscribe = lambda *_a: resubscribed.set()
        back.subscribe(f"{topic}/none", qos=1)
        assert resubscribed.wait(ONE_MESSAGE_S)
        assert received == sent[: INFLIGHT + acked], (len(received), INFLIGHT + acked)
    finally:
        close(back)


# ----------------------------------------------------------------------------- password file
@pytest.mark.skipif(not find_program("mosquitto_passwd"), reason="needs mosquitto_passwd")
def test_a_password_line_is_the_one_mosquitto_passwd_writes(tmp_path: Path) -> None:
    reference = tmp_path / "passwd"
    # a made-up password, on this test's command line only: the launcher never does this
    subprocess.run(
        [str(find_program("mosquitto_passwd")), "-c", "-b", str(reference), "u", "p4ss word"],
        check=True,
        capture_output=True,
        timeout=30,
    )
    line = reference.read_text().strip()
    salt = base64.b64decode(line.split("$")[3])
    assert password_line("u", "p4ss word", salt=salt) == line
    assert password_line("u", "p4ss word") != line  # a salt of its own each time


def test_thing_mismatch_is_a_known_reason() -> None:
    from streamkit.errors import RowError
    from streamkit.events import THING_MISMATCH, check_topic_thing

    check_topic_thing("machines/A", "A")
    check_topic_thing("machines/3/A", "A")
    for topic in ("machines/B", "machines/A/B", "machines/3/B"):
        with pytest.raises(RowError) as mismatch:
            check_topic_thing(topic, "A")
        assert mismatch.value.reason == THING_MISMATCH
