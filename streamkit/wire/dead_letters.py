"""Dead-letter headers: what the bridge, the Spark jobs and the connector attach to a record
they could not handle, and what the connector reads back into the ``dead_letter`` measurement.
The value and key of a dead letter are the original bytes, so these headers are the only place
the reason and the origin live; one set of names keeps every writer readable by the one reader.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column

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

#: longest detail kept in a header (and in the dead_letter point)
DETAIL_CHARS = 500

Headers = list[tuple[str, bytes]]


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


def record_headers(
    reason: str, detail: str, source: str, partition: int, offset: int, payload_bytes: int
) -> Headers:
    """The connector's: a Kafka record it could not write to InfluxDB."""
    return [
        (REASON, reason.encode()),
        (DETAIL, _detail(detail)),
        (SOURCE, source.encode()),
        (SOURCE_PARTITION, str(partition).encode()),
        (SOURCE_OFFSET, str(offset).encode()),
        (PAYLOAD_BYTES, str(payload_bytes).encode()),
    ]


def record_header_column(
    reason: str, stage: str, source: str, partition: Column, offset: Column, payload: Column
) -> Column:
    """The Spark jobs' (an array<struct<key, value>> column): a Kafka record they could not
    decode, with the stage instead of a detail (spark-avro gives no reason)."""
    from pyspark.sql import functions as F

    def header(name: str, value: Column) -> Column:
        return F.struct(F.lit(name).alias("key"), value.cast("binary").alias("value"))

    return F.array(
        header(REASON, F.lit(reason)),
        header(STAGE, F.lit(stage)),
        header(SOURCE, F.lit(source)),
        header(SOURCE_PARTITION, partition.cast("string")),
        header(SOURCE_OFFSET, offset.cast("string")),
        header(PAYLOAD_BYTES, F.length(payload).cast("string")),
    )


def read_headers(headers: Sequence[tuple[str, bytes | None]] | None) -> dict[str, str]:
    """A Kafka record's headers as text (undecodable bytes replaced, a later header wins)."""
    return {key: (value or b"").decode("utf-8", "replace") for key, value in (headers or [])}


def source_of(headers: dict[str, str]) -> str:
    """Where a dead letter came from: its source topic, ``mqtt`` for the bridge's, else unknown."""
    return headers.get(SOURCE) or ("mqtt" if MQTT_TOPIC in headers else "unknown")
