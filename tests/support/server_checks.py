"""Checks of a running stack, shared by the local-process tests and the testcontainers tests
so both prove the same things against different deployments of the same servers."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
import urllib.request
import uuid

import paho.mqtt.client as mqtt
from influxdb_client import InfluxDBClient, Point, WritePrecision
from influxdb_client.client.write_api import SYNCHRONOUS

from stacktools.influx import InfluxClient
from stacktools.wiring import private_topic
from streamkit.config import Settings
from streamkit.kafka_clients import idempotent_producer, transactional_producer
from streamkit.kafka_io import read_to_end
from streamkit.mqtt_client import MqttConnectError, connect, make_client
from streamkit.secret import Secret
from streamkit.tls import client_context
from tests.support.messages import value_of
from tests.support.waits import ONE_MESSAGE_S


def create_topic(settings: Settings) -> str:
    return private_topic(settings, "check", partitions=1, admin_only=True)


def read_all(settings: Settings, topic: str, isolation: str) -> list[bytes]:
    return [value_of(m) for m in read_to_end(settings, topic, isolation)]


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
        settings, f'SELECT "power" FROM "{measurement}" WHERE "thing" = \'R0815\''
    )
    assert status == 200, body
    values = body["results"][0]["series"][0]["values"]
    assert values == [[now_ms, 12.5], [now_ms + 1, 13.5]], values
    status, body = influx_query(settings, f'SELECT * FROM "{measurement}"', auth=False)
    assert status == 401, (status, body)


def prometheus_targets(settings: Settings) -> list[dict]:
    with urllib.request.urlopen(
        f"http://127.0.0.1:{settings.prometheus_port}/api/v1/targets", timeout=10
    ) as response:
        return json.loads(response.read())["data"]["activeTargets"]
