"""The launcher's settings, and the full model its tools read.

:class:`StackSettings` holds what only the launcher reads: servers no service talks to, how
topics are provisioned, the local Spark cluster, Mosquitto's queue limits. :class:`Settings`
composes every concern (each server's settings from ``streamkit.config`` and these): the
launcher, the demo and the tests talk to every server. The services never import it; each
composes the concerns it uses.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from streamkit.config import (
    AlertmanagerSettings,
    InfluxSettings,
    KafkaSettings,
    MqttSettings,
    PrometheusSettings,
)
from streamkit.fields import setting
from streamkit.sizes import ByteSize
from streamkit.wire.retention import POLICIES


@dataclasses.dataclass(frozen=True)
class StackSettings(AlertmanagerSettings, PrometheusSettings):
    """What only the stack launcher and its tools read: servers no service talks to, and how
    topics are provisioned."""

    kafka_controller_port: int = setting(
        9093, "KAFKA_CONTROLLER_PORT", "port of the local KRaft controller (node N: + 2(N-1))"
    )
    topic_partitions: int = setting(4, "TOPIC_PARTITIONS", "partitions of each data topic")
    raw_retention: timedelta = setting(
        timedelta(days=7),
        "RAW_RETENTION",
        "how long the raw topic keeps a record after it was written (cleanup.policy "
        "compact,delete); 'off': compacted alone, the latest record of every key forever. Longer "
        "than any stop of the Spark job or the connector you want to ride out (docs/scaling.md)",
        allow_zero=True,
    )
    influx_retention_raw: timedelta = setting(
        timedelta(days=30),
        "INFLUX_RETENTION_RAW",
        "how long InfluxDB keeps the raw points (retention policy raw, by event time); 'off': "
        "forever",
        allow_zero=True,
    )
    influx_retention_joined: timedelta = setting(
        timedelta(days=30),
        "INFLUX_RETENTION_JOINED",
        "how long InfluxDB keeps the joined pairs (retention policy joined); 'off': forever",
        allow_zero=True,
    )
    influx_retention_windows: timedelta = setting(
        timedelta(days=400),
        "INFLUX_RETENTION_WINDOWS",
        "how long InfluxDB keeps the window aggregates, the long-term copy of the raw data "
        "(retention policy windows); 'off': forever",
        allow_zero=True,
    )
    influx_retention_operation: timedelta = setting(
        timedelta(days=800),
        "INFLUX_RETENTION_OPERATION",
        "how long InfluxDB keeps the operation statistics and overload alerts (retention "
        "policy operation); 'off': forever",
        allow_zero=True,
    )
    influx_retention_diagnostics: timedelta = setting(
        timedelta(days=30),
        "INFLUX_RETENTION_DIAGNOSTICS",
        "how long InfluxDB keeps late records and dead letters (retention policy "
        "diagnostics); 'off': forever",
        allow_zero=True,
    )
    influx_max_series: int = setting(
        1_000_000,
        "INFLUX_MAX_SERIES",
        "series InfluxDB keeps in the database (max-series-per-database); a point of a further "
        "series is refused and becomes a dead letter 'influx_series_limit'; 0: no limit "
        "(docs/influxdb-schema.md)",
    )
    influx_max_tag_values: int = setting(
        100_000,
        "INFLUX_MAX_TAG_VALUES",
        "values one tag may have in one measurement (max-values-per-tag): the things, the "
        "quantity names; a point with a further value is refused as above; 0: no limit",
    )
    alert_webhook_url: str = setting(
        "",
        "ALERT_WEBHOOK_URL",
        "where the local Alertmanager sends every alert (a webhook receiver's URL); empty: "
        "alerts only show in its API and web page",
    )
    spark_master_port: int = setting(
        7077,
        "SPARK_MASTER_PORT",
        "port of the local Spark standalone master (stack component spark; worker N "
        "listens on this port + N)",
    )
    spark_master_ui_port: int = setting(
        8080,
        "SPARK_MASTER_UI_PORT",
        "port of the local Spark master's web UI and JSON status (worker N's UI: + N)",
    )
    tls_server_cert_file: str = setting(
        "",
        "TLS_SERVER_CERT_FILE",
        "certificate chain (PEM) Kafka, Mosquitto and InfluxDB present (default: made by the "
        "launcher under <run dir>/tls, signed by its CA)",
    )
    tls_server_key_file: str = setting(
        "",
        "TLS_SERVER_KEY_FILE",
        "unencrypted PKCS#8 key (PEM) of TLS_SERVER_CERT_FILE (default: made with it)",
    )
    tls_hostnames: str = setting(
        "",
        "TLS_HOSTNAMES",
        "more names or addresses (comma-separated) the made server certificate is valid for, "
        "besides 127.0.0.1, ::1, localhost and compose's service names",
    )
    mqtt_max_queued_messages: int = setting(
        1_000_000,
        "MQTT_MAX_QUEUED_MESSAGES",
        "QoS 1 messages Mosquitto keeps per client beyond those in flight (the bridge's session "
        "while it is down or behind); past this, or MQTT_MAX_QUEUED_BYTES, Mosquitto drops that "
        "client's newer messages: size it as rows per second x the outage to ride out "
        "(docs/mqtt-bridge.md)",
    )
    mqtt_max_queued_bytes: ByteSize = setting(
        ByteSize(512 << 20),
        "MQTT_MAX_QUEUED_BYTES",
        "payload bytes of those queued messages at most, per client (e.g. 512m)",
    )
    mqtt_max_inflight_messages: int = setting(
        10_000,
        "MQTT_MAX_INFLIGHT_MESSAGES",
        "QoS 1 messages Mosquitto sends a client before its PUBACKs (the bridge acknowledges "
        "only after Kafka confirmed)",
    )
    mqtt_max_inflight_bytes: ByteSize = setting(
        ByteSize(64 << 20),
        "MQTT_MAX_INFLIGHT_BYTES",
        "payload bytes in flight per client at most (a larger single message still goes)",
    )
    spark_workers: int = setting(2, "SPARK_WORKERS", "workers of the local Spark cluster")
    spark_worker_cores: int = setting(
        1, "SPARK_WORKER_CORES", "cores each local Spark worker offers"
    )
    spark_worker_memory: ByteSize = setting(
        ByteSize(2 << 30),
        "SPARK_WORKER_MEMORY",
        "memory each local Spark worker offers its executors (e.g. 2g, 512m); raise it when "
        "executors run out of memory",
    )

    def influx_retention(self) -> dict[str, timedelta]:
        """Each InfluxDB retention policy (streamkit.wire.retention) and how long it keeps
        points; zero: forever."""
        return {policy: getattr(self, f"influx_retention_{policy}") for policy in POLICIES}


@dataclasses.dataclass(frozen=True)
class Settings(KafkaSettings, MqttSettings, InfluxSettings, StackSettings):
    """Every concern: the stack launcher, the tools and the tests, which talk to every server."""
