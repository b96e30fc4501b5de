"""How one MQTT message becomes Kafka records.

Key: ``<thing>|<quantity>|<event time ms>``, deterministic, so a redelivered or replayed row
produces byte-identical records that collapse under compaction and can be recognised
downstream. Partition: from the thing alone (crc32), so each (thing, quantity) stream stays in
one partition, in order; the default partitioner would hash the whole key and scatter a
thing's records over all partitions.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass

from streamkit.avro_codec import MeasurementEncoder
from streamkit.events import Row

DLQ_SAMPLE_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class KafkaRecord:
    key: bytes
    value: bytes
    partition: int


def record_key(thing: str, quantity: str, event_time_ms: int) -> bytes:
    return f"{thing}|{quantity}|{event_time_ms}".encode()


def thing_partition(thing: str, partitions: int) -> int:
    return zlib.crc32(thing.encode()) % partitions


class RowSplitter:
    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self._encoder = MeasurementEncoder()

    def split(self, row: Row) -> list[KafkaRecord]:
        partition = thing_partition(row.thing, self.partitions)
        return [KafkaRecord(record_key(row.thing, quantity, row.timestamp_ms), value, partition)
                for quantity, value in self._encoder.encode_row(row.thing, row.row_id, row.timestamp_ms, row.quantities)]


def dlq_headers(reason: str, detail: str, mqtt_topic: str, size: int) -> list[tuple[str, bytes]]:
    return [("reason", reason.encode()), ("detail", detail[:500].encode("utf-8", "replace")),
            ("mqtt_topic", mqtt_topic.encode("utf-8", "replace")), ("payload_bytes", str(size).encode())]
