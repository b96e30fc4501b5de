"""Checks of a running stack, shared by the local-process tests and the testcontainers tests
so both prove the same things against different deployments of the same servers."""

from __future__ import annotations

import dataclasses
import json
import socket
import ssl
import threading
import time
import urllib.request
import uuid
from pathlib import Path

import paho.mqtt.client as mqtt
from influxdb_client import InfluxDBClient, Point, WritePrecision
from influxdb_client.client.write_api import SYNCHRONOUS

from stacktools.harness.wiring import private_topic
from stacktools.stack.influx import InfluxClient
from stacktools.stack.settings import Settings
from streamkit.kafka_clients import idempotent_producer, transactional_producer
from streamkit.kafka_io import read_to_end
from streamkit.mqtt_client import MqttConnectError, connect, make_client
from streamkit.secret import Secret
from streamkit.tls import client_context
from streamkit.wire.retention import source
from tests.support.messages import value_of
from tests.support.waits import ONE_MESSAGE_S


def create_topic(settings: Settings) -> str:
    return private_topic(settings, "check", partitions=1, admin_only=True)


def read_all(settings: Settings, topic: str, isolation: str) -> list[bytes]:
    return [value_of(m) for m in read_to_end(settings, topic, isolation)]


def check_three_node_replication(properties: dict[str, str]) -> None:
    """A Kafka node's ``server.properties`` with the settings for three nodes: every topic and
    the internal ones replicated three times, two in sync to acknowledge."""
    for key in (
        "default.replication.factor",
        "offsets.topic.replication.factor",
        "transaction.state.log.replication.factor",
    ):
        assert properties[key] == "3", key
    assert properties["min.insync.replicas"] == properties["transaction.state.log.min.isr"] == "2"


def check_transactions(settings: Settings, topic: str | None = None) -> None:
    """Aborted records stay invisible to read_committed readers; committed ones are visible.
    ``topic``: an empty one-partition topic made beforehand (default: made here)."""
    topic = topic or create_topic(settings)
    producer = transactional_producer(settings, f"check-{uuid.uuid4().hex[:8]}")
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, key=b"k", value=f"aborted-{i}".encode(), partition=0)
    producer.flush()
    producer.abort_transaction()
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, key=b"k", value=f"committed-{i}".encode(), partition=0)
    producer.commit_transaction()
    committed = read_all(settings, topic, "read_committed")
    assert committed == [b"committed-0", b"committed-1", b"committed-2"], committed
    # The control: the aborted records really were written, a read_uncommitted reader sees them.
    uncommitted = read_all(settings, topic, "read_uncommitted")
    assert sorted(uncommitted) == sorted(
        [f"aborted-{i}".encode() for i in range(5)] + [f"committed-{i}".encode() for i in range(3)]
    ), uncommitted


def check_plain_produce_consume(settings: Settings, topic: str | None = None) -> None:
    topic = topic or create_topic(settings)
    producer = idempotent_producer(settings, "check")
    for i in range(10):
        producer.produce(topic, value=str(i).encode(), partition=0)
    assert producer.flush(30) == 0
    assert read_all(settings, topic, "read_committed") == [str(i).encode() for i in range(10)]


def check_mqtt_auth(settings: Settings) -> None:
    """Publish/subscribe with credentials works; anonymous and wrong passwords are refused."""
    topic = f"check/{uuid.uuid4().hex}"
    received: list[bytes] = []
    got = threading.Event()
    subscriber = make_client(settings, client_id=f"sub-{uuid.uuid4().hex[:8]}")
    subscribed = threading.Event()
    subscriber.on_subscribe = lambda *_args: subscribed.set()

    def on_message(_c: mqtt.Client, _u: object, message: mqtt.MQTTMessage) -> None:
        received.append(bytes(message.payload))
        got.set()

    subscriber.on_message = on_message
    connect(subscriber, settings)
    subscriber.subscribe(topic, qos=1)
    assert subscribed.wait(ONE_MESSAGE_S), "SUBACK not received"
    publisher = make_client(settings, client_id=f"pub-{uuid.uuid4().hex[:8]}")
    connect(publisher, settings)
    publisher.publish(topic, b"hello", qos=1).wait_for_publish(ONE_MESSAGE_S)
    assert got.wait(ONE_MESSAGE_S), "message not delivered"
    assert received == [b"hello"]
    for client in (publisher, subscriber):
        client.disconnect()
        client.loop_stop()

    anonymous = make_client(settings)  # TLS as the settings say, then no credentials at all
    anonymous.username_pw_set(None)
    try:
        connect(anonymous, settings, timeout_s=5)
        raise AssertionError("anonymous MQTT connection was accepted")
    except MqttConnectError as exc:
        assert exc.reason == "Not authorized", exc  # Mosquitto's CONNACK without credentials
    wrong_settings = dataclasses.replace(settings, mqtt_password=Secret("wrong-password"))
    try:
        connect(make_client(wrong_settings), wrong_settings, timeout_s=5)
        raise AssertionError("MQTT connection with a wrong password was accepted")
    except MqttConnectError as exc:
        assert exc.reason == "Not authorized", exc  # Mosquitto's CONNACK for a bad password


def influx_query(settings: Settings, statement: str, *, auth: bool = True) -> tuple[int, dict]:
    return InfluxClient(settings).query(
        statement, auth=auth, database=settings.influx_database, epoch="ms"
    )


def check_influx_write_read(settings: Settings) -> None:
    """influxdb-client's v2 write API stores points that InfluxQL reads back; no auth, no access."""
    measurement = f"check_{uuid.uuid4().hex[:10]}"
    now_ms = int(time.time() * 1000)
    with InfluxDBClient(
        url=settings.influx_base_url,
        token=f"{settings.influx_username}:{settings.influx_password.reveal()}",
        org="-",
        verify_ssl=True,
        ssl_context=client_context(settings),  # the stack's CA only, with TLS on
    ) as client:
        client.write_api(write_options=SYNCHRONOUS).write(
            bucket=f"{settings.influx_database}/autogen",
            write_precision=WritePrecision.MS,
            record=[
                Point(measurement)
                .tag("thing", "R0815")
                .field("power", 12.5)
                .time(now_ms, WritePrecision.MS),
                Point(measurement)
                .tag("thing", "R0815")
                .field("power", 13.5)
                .time(now_ms + 1, WritePrecision.MS),
            ],
        )
    status, body = influx_query(
        settings, f'SELECT "power" FROM {source(measurement)} WHERE "thing" = \'R0815\''
    )
    assert status == 200, body
    values = body["results"][0]["series"][0]["values"]
    assert values == [[now_ms, 12.5], [now_ms + 1, 13.5]], values
    status, body = influx_query(settings, f"SELECT * FROM {source(measurement)}", auth=False)
    assert status == 401, (status, body)


def prometheus_targets(settings: Settings) -> list[dict]:
    with urllib.request.urlopen(
        f"http://127.0.0.1:{settings.prometheus_port}/api/v1/targets", timeout=10
    ) as response:
        return json.loads(response.read())["data"]["activeTargets"]


#: The first bytes a plaintext client of each server sends: MQTT 3.1.1's CONNECT, Kafka's
#: ApiVersions request (v0, correlation id 1, no client id), HTTP's GET.
PLAINTEXT_HELLO = {
    "kafka": b"\x00\x00\x00\x0a\x00\x12\x00\x00\x00\x00\x00\x01\xff\xff",
    "mqtt": b"\x10\x0c\x00\x04MQTT\x04\x02\x00\x3c\x00\x00",
    "influxdb": b"GET /ping HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n",
}


def tls_ports(settings: Settings) -> dict[str, int]:
    return {
        "kafka": settings.kafka_port,
        "mqtt": settings.mqtt_port,
        "influxdb": settings.influx_port,
    }


def plaintext_reply(port: int, hello: bytes) -> bytes:
    """What a server answers a plaintext client's first message (b"" when it just closes)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        raw.sendall(hello)
        try:
            return raw.recv(4096)
        except (ConnectionResetError, TimeoutError):
            return b""


def check_tls_only(settings: Settings, other_ca: Path) -> None:
    """Kafka's, Mosquitto's and InfluxDB's ports complete a TLS handshake for 127.0.0.1 with the
    stack's CA; a client that trusts another CA is refused; a plaintext client gets no answer of
    its protocol (Kafka and Mosquitto close, InfluxDB's Go server says it speaks HTTPS)."""
    stranger = ssl.create_default_context(cafile=str(other_ca))
    ours = client_context(settings)
    assert ours is not None, "the settings have TLS off"
    for name, port in tls_ports(settings).items():
        with (
            socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
            ours.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
        ):
            assert tls.version() in ("TLSv1.2", "TLSv1.3"), (name, tls.version())
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            try:
                stranger.wrap_socket(raw, server_hostname="127.0.0.1").close()
            except ssl.SSLCertVerificationError as exc:
                assert exc.verify_message == "self-signed certificate in certificate chain", exc
            else:
                raise AssertionError(f"{name}: a client trusting another CA was let in")
        reply = plaintext_reply(port, PLAINTEXT_HELLO[name])
        if name == "influxdb":
            assert b"Client sent an HTTP request to an HTTPS server" in reply, reply[:200]
        else:
            assert reply == b"" or reply[:1] == b"\x15", (name, reply[:50])  # closed, TLS alert


def publish_reasons(client: mqtt.Client, messages: list[tuple[str, bytes]]) -> list[str]:
    """Publish each (QoS 1) and return the broker's PUBACK reason of each, in order."""
    reasons: dict[int, str] = {}
    acked = threading.Semaphore(0)

    def on_publish(_c: object, _u: object, mid: int, reason: mqtt.ReasonCode, _p: object) -> None:
        reasons[mid] = str(reason)
        acked.release()

    client.on_publish = on_publish
    mids = [client.publish(topic, payload, qos=1).mid for topic, payload in messages]
    for _ in mids:
        assert acked.acquire(timeout=ONE_MESSAGE_S), "no PUBACK"
    return [reasons[mid] for mid in mids]


def check_machine_identities(settings: Settings, machines: dict[str, str]) -> None:
    """MQTT_MACHINE_IDENTITIES on a running broker: a machine user (two of ``machines``, Thing
    -> password) publishes to its own topic and is refused another's; the shared ``machine``
    user cannot log in."""
    mine, other = sorted(machines)[:2]
    prefix = settings.mqtt_topic_prefix
    machine = dataclasses.replace(
        settings, mqtt_username=mine, mqtt_password=Secret(machines[mine])
    )
    client = make_client(machine, client_id=f"identity-{uuid.uuid4().hex[:8]}")
    connect(client, machine)
    try:
        reasons = publish_reasons(
            client, [(f"{prefix}/{other}", b"as another"), (f"{prefix}/{mine}", b"as itself")]
        )
    finally:
        client.disconnect()
        client.loop_stop()
    assert reasons == ["Not authorized", "Success"], reasons
    shared = settings.acting_as("mqtt", "machine")
    try:
        connect(make_client(shared), shared, timeout_s=10)
        raise AssertionError("the shared machine user logged in with identities on")
    except MqttConnectError as exc:
        assert exc.reason == "Not authorized", exc
