"""How one MQTT message becomes Kafka records: one per quantity, keyed and partitioned as the
wire contract says (streamkit.wire.keys: deterministic key, partition by thing)."""

from __future__ import annotations

from dataclasses import dataclass

from streamkit.events import Row
from streamkit.wire import MeasurementEncoder, record_key, thing_partition

DLQ_SAMPLE_BYTES = 64 * 1024

#: One record as confluent_kafka's ``produce_batch`` takes it: {"key": bytes, "value": bytes}.
BatchRecord = dict[str, bytes]


@dataclass(frozen=True, slots=True)
class KafkaRecord:
    """One record with its partition, for readers that want the records of a row one by one
    (tests, oracles, benchmarks); the bridge itself produces :meth:`RowSplitter.batch`."""

    key: bytes
    value: bytes
    partition: int


class RowSplitter:
    def __init__(self, partitions: int, header: bytes = b"") -> None:
        """``header``: what opens every value (the schema registry's, streamkit.wire.registry;
        empty without one)."""
        self.partitions = partitions
        self.header = header
        self._encoder = MeasurementEncoder()

    def batch(self, row: Row) -> tuple[int, list[BatchRecord]]:
        """The row's partition and its records, built straight into the dicts ``produce_batch``
        reads: the bridge's hot path, so no other object is made per record."""
        thing, time_ms = row.thing, row.timestamp_ms
        encoded = self._encoder.encode_row(thing, row.row_id, time_ms, row.quantities)
        header = self.header
        if header:
            encoded = [(quantity, header + value) for quantity, value in encoded]
        return thing_partition(thing, self.partitions), [
            {"key": record_key(thing, quantity, time_ms), "value": value}
            for quantity, value in encoded
        ]

    def split(self, row: Row) -> list[KafkaRecord]:
        """The same records as :meth:`batch` (the same bytes), one object each."""
        partition, records = self.batch(row)
        return [KafkaRecord(record["key"], record["value"], partition) for record in records]
