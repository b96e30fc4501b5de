"""The connector's settings: the service base, Kafka and InfluxDB, plus batching, retry and
identity knobs."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from streamkit.config import InfluxSettings, KafkaSettings
from streamkit.deadline import Backoff
from streamkit.fields import login_as, serves_metrics_on, setting


@dataclass(frozen=True)
class ConnectorSettings(KafkaSettings, InfluxSettings):
    """Kafka in, InfluxDB out: no MQTT or launcher settings."""

    kafka_username: str = login_as("kafka", "connector")
    influx_username: str = login_as("influx", "connector")
    metrics_port: int = serves_metrics_on(9205)
    group_id: str = setting(
        "db-connector",
        "CONNECTOR_GROUP_ID",
        "Kafka consumer group: its committed offsets are the connector's progress",
    )
    instance_id: str = setting(
        "db-connector-1",
        "CONNECTOR_INSTANCE_ID",
        "stable and unique per instance: its Kafka transactional.id (a restarted instance "
        "fences its predecessor) and static group.instance.id (it gets its partitions "
        "back at once)",
    )
    topics: str = setting(
        "raw,joined,aggregates,late,opstats,overloads,dlq",
        "CONNECTOR_TOPICS",
        "which of the pipeline's topics to load (comma separated: raw, joined, aggregates, "
        "late, opstats, overloads, dlq); the topic names themselves are RAW_TOPIC etc.",
    )
    batch_points: int = setting(
        20000, "CONNECTOR_BATCH_POINTS", "write to InfluxDB when this many points are pending"
    )
    flush_interval: timedelta = setting(
        timedelta(milliseconds=250),
        "CONNECTOR_FLUSH_INTERVAL",
        "longest a point waits while another write is in flight (with none in flight, "
        "points are written as soon as the consumer has caught up)",
        was="CONNECTOR_FLUSH_INTERVAL_MS",
    )
    write_timeout: timedelta = setting(
        timedelta(seconds=30),
        "CONNECTOR_WRITE_TIMEOUT",
        "timeout of one InfluxDB write request",
        was="CONNECTOR_WRITE_TIMEOUT_MS",
    )
    retry_initial: timedelta = setting(
        timedelta(milliseconds=200),
        "CONNECTOR_RETRY_INITIAL",
        "first back-off after a failed write",
        was="CONNECTOR_RETRY_INITIAL_MS",
    )
    retry_max: timedelta = setting(
        timedelta(seconds=10),
        "CONNECTOR_RETRY_MAX",
        "longest back-off between write attempts",
        was="CONNECTOR_RETRY_MAX_MS",
    )

    def write_backoff(self) -> Backoff:
        """The back-off between attempts of a failed write or commit."""
        return Backoff(
            initial_s=self.retry_initial.total_seconds(), max_s=self.retry_max.total_seconds()
        )
