"""How one MQTT message becomes Kafka records: one per quantity, keyed and partitioned as the
wire contract says (streamkit.wire.keys: deterministic key, partition by thing)."""
from __future__ import annotations

from dataclasses import dataclass

from streamkit.events import Row
from streamkit.wire import MeasurementEncoder, record_key, thing_partition

DLQ_SAMPLE_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class KafkaRecord:
    key: bytes
    value: bytes
    partition: int


class RowSplitter:
    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self._encoder = MeasurementEncoder()

    def split(self, row: Row) -> list[KafkaRecord]:
        partition = thing_partition(row.thing, self.partitions)
        return [KafkaRecord(record_key(row.thing, quantity, row.timestamp_ms), value, partition)
                for quantity, value in self._encoder.encode_row(row.thing, row.row_id, row.timestamp_ms, row.quantities)]
