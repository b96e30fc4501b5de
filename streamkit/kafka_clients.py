"""Kafka client setup shared by all services (confluent-kafka / librdkafka settings).

The settings here are the ones exactly-once depends on, so they live in one place: idempotent
producers with acks=all, transactional producers with a stable id, read_committed consumers
that never auto-commit.
"""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, Message, Producer
from confluent_kafka.admin import AdminClient

from streamkit.config import KafkaSettings
from streamkit.deadline import Deadline
from streamkit.errors import TopicMissing
from streamkit.logs import KafkaClientLog

#: Large enough for the dead-letter topic's oversized payloads (topic max.message.bytes is 16 MiB).
MAX_MESSAGE_BYTES = 16 * 1024 * 1024


#: The stack's client listener: SCRAM over TLS (SASL_SSL), or over plain TCP with TLS off.
SASL_MECHANISM = "SCRAM-SHA-512"


def owned_name(settings: KafkaSettings, name: str) -> str:
    """A Kafka name this job uses (transactional id, consumer group) under its Kafka user's
    name: each Spark job has a user of its own, allowed only the names that begin with
    ``<user>.`` (``stacktools.stack.access``), so no job can fence or take over another's."""
    return f"{settings.kafka_username}.{name}"


def uses_tls(settings: KafkaSettings) -> bool:
    """Whether the client speaks TLS to the broker (SASL_SSL or SSL)."""
    return settings.kafka_protocol.upper() in {"SASL_SSL", "SSL"}


def client_config(settings: KafkaSettings, client_id: str) -> dict[str, Any]:
    """Where and as whom a librdkafka client connects: every client of every service starts here.
    Its log lines go through the service's logging (a ``kafka`` logger, see streamkit.logs)
    rather than librdkafka's own lines on stderr."""
    config: dict[str, Any] = {
        "bootstrap.servers": settings.bootstrap_servers,
        "client.id": client_id,
        "security.protocol": settings.kafka_protocol,
        "logger": KafkaClientLog(),
    }
    if settings.kafka_protocol.startswith("SASL"):
        config.update(
            {
                "sasl.mechanism": SASL_MECHANISM,
                "sasl.username": settings.kafka_username,
                "sasl.password": settings.kafka_password.reveal(),
            }
        )
    if uses_tls(settings):
        # the broker's certificate is verified against the stack's CA, and its name against
        # the address connected to (librdkafka's default, kept explicit)
        config.update(
            {
                "ssl.ca.location": str(settings.ca_path),
                "ssl.endpoint.identification.algorithm": "https",
            }
        )
    return config


def jaas_config(user: str, password: str) -> str:
    """A Java client's (Spark's, the broker's own) SCRAM login line."""

    def quoted(value: str) -> str:
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'

    return (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f"username={quoted(user)} password={quoted(password)};"
    )


def java_client_properties(settings: KafkaSettings) -> dict[str, str]:
    """The same connection for a Java client (Spark's Kafka source, Kafka's own tools): SCRAM
    through a JAAS line, the CA as a PEM trust store, host names verified."""
    properties = {
        "bootstrap.servers": settings.bootstrap_servers,
        "security.protocol": settings.kafka_protocol,
    }
    if settings.kafka_protocol.startswith("SASL"):
        properties.update(
            {
                "sasl.mechanism": SASL_MECHANISM,
                "sasl.jaas.config": jaas_config(
                    settings.kafka_username, settings.kafka_password.reveal()
                ),
            }
        )
    if uses_tls(settings):
        properties.update(
            {
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(settings.ca_path),
                "ssl.endpoint.identification.algorithm": "https",
            }
        )
    return properties


def spark_kafka_options(settings: KafkaSettings) -> dict[str, str]:
    """The same connection for Spark's Kafka source and sink (options prefixed ``kafka.``)."""
    return {f"kafka.{key}": value for key, value in java_client_properties(settings).items()}


def admin_client(settings: KafkaSettings, client_id: str = "streamkit-admin") -> AdminClient:
    # log_level 4: librdkafka's info lines (e.g. "purging unserved events" at close) are noise here
    return AdminClient({**client_config(settings, client_id), "log_level": 4})


def idempotent_producer(settings: KafkaSettings, client_id: str, **overrides: Any) -> Producer:
    """No loss, no reordering, no duplicates from retries; batching tuned for throughput."""
    config = {
        **client_config(settings, client_id),
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 20,
        "batch.size": 1_000_000,
        "compression.type": "lz4",
        "message.max.bytes": MAX_MESSAGE_BYTES,
        **overrides,
    }
    return Producer(config)


def transactional_producer(
    settings: KafkaSettings, transactional_id: str, **overrides: Any
) -> Producer:
    """A stable transactional.id per writer: a restarted writer fences its zombie predecessor."""
    producer = idempotent_producer(
        settings, transactional_id, **{"transactional.id": transactional_id, **overrides}
    )
    producer.init_transactions(30)
    return producer


def committed_consumer(settings: KafkaSettings, group_id: str, **overrides: Any) -> Consumer:
    """read_committed, manual offset commits: a consumer sees only committed transactions and
    decides itself when its input counts as processed."""
    config = {
        **client_config(settings, group_id),
        "group.id": group_id,
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        **overrides,
    }
    return Consumer(config)


def partition_count(settings: KafkaSettings, topic: str, wait_s: float = 30) -> int:
    """A topic's partition count; waits a little, as a just-created topic or a just restarted
    broker may not report it yet. Raises LookupError when it does not exist after ``wait_s``."""
    admin = admin_client(settings)
    deadline = Deadline(wait_s)
    while True:
        metadata = admin.list_topics(topic, timeout=30)
        if topic in metadata.topics and metadata.topics[topic].error is None:
            return len(metadata.topics[topic].partitions)
        if deadline.expired():
            found = metadata.topics.get(topic)
            raise TopicMissing(f"Kafka topic {topic}: {found.error if found else 'missing'}")
        time.sleep(1)


def record_position(message: Message) -> tuple[str, int, int]:
    """A consumed record's (topic, partition, offset). confluent_kafka types each as optional
    because an error event carries none; a record always has all three, so a missing one means
    the caller passed an error event (check ``error()`` first)."""
    topic, partition, offset = message.topic(), message.partition(), message.offset()
    if topic is None or partition is None or offset is None:
        raise ValueError(f"not a record but an error event: {message.error()}")
    return topic, partition, offset


def produce_retrying(
    producer: Producer,
    topic: str,
    value: bytes | None,
    key: bytes | None = None,
    *,
    poll_s: float = 0.1,
    **kwargs: Any,
) -> None:
    """Queue one record, waiting while librdkafka's local queue is full (BufferError): polling
    lets it send, which makes room. Any other error is the caller's to judge."""
    while True:
        try:
            producer.produce(topic, value=value, key=key, **kwargs)
            return
        except BufferError:
            producer.poll(poll_s)
