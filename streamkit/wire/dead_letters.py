"""Dead-letter headers: what the bridge, the Spark jobs and the connector attach to a record
they could not handle, and what the connector reads back into the ``dead_letter`` measurement.
The value and key of a dead letter are the original bytes, so these headers are the only place
the reason and the origin live; one set of names keeps every writer readable by the one reader.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

#: Header names. The value and key of a dead letter are the original bytes; these say why.
REASON = "reason"
DETAIL = "detail"
STAGE = "stage"
#: the Kafka topic of the record (Spark jobs, connector)
SOURCE = "source"
SOURCE_PARTITION = "source_partition"
SOURCE_OFFSET = "source_offset"
#: the MQTT topic of the message (bridge); its source is MQTT
MQTT_TOPIC = "mqtt_topic"
#: the original payload's size: the bridge dead-letters a sample of large payloads only
PAYLOAD_BYTES = "payload_bytes"

#: Reasons shared by several writers (each writer may add its own, e.g. the bridge's
#: ``invalid_json``): a value that is not Avro of its topic's schema, and a point InfluxDB refused.
UNDECODABLE = "undecodable"
INFLUX_REJECTED = "influx_rejected"
#: A point InfluxDB refused because its series would pass the database's cardinality limits.
INFLUX_SERIES_LIMIT = "influx_series_limit"

#: longest detail kept in a header (and in the dead_letter point)
DETAIL_CHARS = 500

Headers = list[tuple[str, bytes]]
#: A header value before encoding: text for the Python writers, a Spark column for the jobs.
V = TypeVar("V")


def _detail(detail: str) -> bytes:
    return detail[:DETAIL_CHARS].encode("utf-8", "replace")


def mqtt_headers(reason: str, detail: str, mqtt_topic: str, payload_bytes: int) -> Headers:
    """The bridge's: an MQTT message it could not turn into records."""
    return [
        (REASON, reason.encode()),
        (DETAIL, _detail(detail)),
        (MQTT_TOPIC, mqtt_topic.encode("utf-8", "replace")),
        (PAYLOAD_BYTES, str(payload_bytes).encode()),
    ]


def record_fields(
    reason: V, explanation: tuple[str, V], source: V, partition: V, offset: V, payload_bytes: V
) -> list[tuple[str, V]]:
    """The headers of a Kafka record set aside, in their order: the one layout the connector
    (values as bytes, :func:`record_headers`) and the Spark jobs (values as columns) fill.
    ``explanation`` is ``(DETAIL, text)`` or, where no detail is known, ``(STAGE, name)``."""
    name, value = explanation
    if name not in (DETAIL, STAGE):
        raise ValueError(f"a dead letter is explained by {DETAIL} or {STAGE}, not {name!r}")
    return [
        (REASON, reason),
        (name, value),
        (SOURCE, source),
        (SOURCE_PARTITION, partition),
        (SOURCE_OFFSET, offset),
        (PAYLOAD_BYTES, payload_bytes),
    ]


def record_headers(
    reason: str, detail: str, source: str, partition: int, offset: int, payload_bytes: int
) -> Headers:
    """The connector's: a Kafka record it could not write to InfluxDB."""
    fields = record_fields(
        reason, (DETAIL, detail), source, str(partition), str(offset), str(payload_bytes)
    )
    return [(name, _detail(v) if name == DETAIL else v.encode()) for name, v in fields]


HeaderValue = str | bytes | None


def read_headers(
    headers: Sequence[tuple[str, HeaderValue]] | Mapping[str, HeaderValue] | None,
) -> dict[str, str]:
    """A Kafka record's headers as text (undecodable bytes replaced, a later header wins). A
    consumed record has a list of (name, bytes) pairs; the other shapes are those
    confluent_kafka's header type allows too."""
    pairs = headers.items() if isinstance(headers, Mapping) else headers or []
    return {key: _header_text(value) for key, value in pairs}


def _header_text(value: HeaderValue) -> str:
    if isinstance(value, str):
        return value
    return (value or b"").decode("utf-8", "replace")


def source_of(headers: dict[str, str]) -> str:
    """Where a dead letter came from: its source topic, ``mqtt`` for the bridge's, else unknown."""
    return headers.get(SOURCE) or ("mqtt" if MQTT_TOPIC in headers else "unknown")
