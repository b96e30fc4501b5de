"""The bridge's settings: the service base, Kafka and MQTT, plus what only the bridge needs."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from streamkit.config import KafkaSettings, MqttSettings
from streamkit.fields import login_as, serves_metrics_on, setting
from streamkit.sizes import ByteSize


@dataclass(frozen=True)
class BridgeSettings(KafkaSettings, MqttSettings):
    """MQTT in, Kafka out: no InfluxDB or launcher settings."""

    kafka_username: str = login_as("kafka", "bridge")
    mqtt_username: str = login_as("mqtt", "bridge")
    metrics_port: int = serves_metrics_on(9202)
    mqtt_client_id: str = setting(
        "mqtt-bridge-1",
        "BRIDGE_CLIENT_ID",
        "fixed MQTT client id: the broker keeps this session's messages while we are down",
    )
    session_expiry: timedelta = setting(
        timedelta(days=7),
        "BRIDGE_SESSION_EXPIRY",
        "how long the broker keeps the session (whole seconds, rounded up)",
        allow_zero=True,
        was="BRIDGE_SESSION_EXPIRY_S",
    )
    mqtt5: bool = setting(
        False,
        "BRIDGE_MQTT5",
        "speak MQTT 5 (session expiry sent by us) instead of 3.1.1 (expiry set by the broker's "
        "persistent_client_expiration); turn it on when the broker's expiry cannot be set",
    )
    max_payload_bytes: ByteSize = setting(
        ByteSize(1 << 20),
        "BRIDGE_MAX_PAYLOAD_BYTES",
        "larger MQTT payloads are dead-lettered (their first 64 KiB kept); e.g. 1m, 256k; raise "
        "it when machines send larger rows",
    )
    max_unacked: int = setting(
        20000,
        "BRIDGE_MAX_UNACKED",
        "stop reading MQTT while this many messages wait for Kafka (bounded memory)",
    )
    linger: timedelta = setting(
        timedelta(milliseconds=20),
        "BRIDGE_LINGER",
        "Kafka producer linger: larger batches, more latency",
        allow_zero=True,
        was="BRIDGE_LINGER_MS",
    )
    max_future: timedelta = setting(
        timedelta(hours=1),
        "BRIDGE_MAX_FUTURE",
        "rows whose event time is further ahead of the bridge's clock than this are dead-lettered "
        "(future_timestamp): one bad device clock must not move its machine's event time for good",
    )
