"""The single pass's Kafka records built in the driver's Python, from the rendered output rows.

With the state in the driver (``spark_jobs.driver_state``) a batch's outputs already are
columns in this process: handing them back to Spark to encode (``spark_jobs.outputs``) would
cost a Spark job and an Arrow round trip per batch. This module writes the same records:
topic, key, Avro value (with the registry's header when it is on), partition by thing, and
the dead letters' headers, each as the Spark routes build them (tests compare the two).
"""

from __future__ import annotations

import numpy as np

from spark_jobs import dead_letters
from spark_jobs.eos_sink import OutputRow
from spark_jobs.output_columns import OutputRows
from spark_jobs.outputs import AGGREGATE, JOINED, LATE, OUTPUT_KINDS
from streamkit.wire import aggregate_key, record_key, thing_partition
from streamkit.wire import dead_letters as wire_dead_letters
from streamkit.wire.avro_encode import ColumnEncoder
from windowing import STAGE as WINDOW_STAGE

#: record type -> the Avro schema of its value, for the flat schemas encoded column-wise
SCHEMAS = {kind: spec.schema for kind, spec in OUTPUT_KINDS.items() if not spec.encoded}
#: record types whose rows carry their key and value made by the state function
ENCODED = tuple(kind for kind, spec in OUTPUT_KINDS.items() if spec.encoded)


def _keys(record_type: str, columns: dict[str, np.ndarray]) -> list[bytes]:
    """The route's deterministic key of every row, by the wire contract's key functions."""
    if record_type == JOINED:
        return [key.encode() for key in columns["id"]]
    if record_type == AGGREGATE:
        return [
            aggregate_key(*row)
            for row in zip(
                columns["thing"],
                columns["quantity"],
                columns["window_label"],
                columns["window_start_ms"],
                strict=True,
            )
        ]
    return [
        record_key(*row)
        for row in zip(columns["thing"], columns["quantity"], columns["event_time_ms"], strict=True)
    ]


#: Columns a route needs beyond its Avro fields: the aggregate's key, the late record's stage.
KEY_COLUMNS = {AGGREGATE: ["window_label"], LATE: ["stage"]}


class KafkaOutputs:
    """Output rows -> the sink's rows, for one query's topics and partition counts."""

    def __init__(
        self,
        topics: dict[str, str],
        partitions: dict[str, int],
        headers: dict[str, bytes],
        *,
        dlq_topic: str,
        dlq_partitions: int,
        source_topic: str,
        stage: str,
    ) -> None:
        self.topics, self.partitions, self.headers = topics, partitions, headers
        self.dlq_topic, self.dlq_partitions = dlq_topic, dlq_partitions
        self.source_topic, self.stage = source_topic, stage
        self.encoders = {kind: ColumnEncoder(schema) for kind, schema in SCHEMAS.items()}

    def rows(self, out: OutputRows) -> list[OutputRow]:
        records: list[OutputRow] = []
        for record_type in (JOINED, AGGREGATE, LATE):
            count = out.count(record_type)
            if count:
                records += self._routed(record_type, out, count)
        for record_type in ENCODED:
            if out.count(record_type):
                records += self._encoded(record_type, out)
        if out.count(dead_letters.RECORD_TYPE):
            records += self._dead_letters(out)
        return records

    def _encoded(self, record_type: str, out: OutputRows) -> list[OutputRow]:
        """Rows the state function encoded (``spark_jobs.outputs.encoded_route``), partitioned
        by thing."""
        columns = out.columns(record_type, ["thing", "avro_key", "avro_value"])
        topic, partitions = self.topics[record_type], self.partitions[record_type]
        return [
            (topic, key, value, thing_partition(thing, partitions), None)
            for thing, key, value in zip(
                columns["thing"], columns["avro_key"], columns["avro_value"], strict=True
            )
        ]

    def _routed(self, record_type: str, out: OutputRows, count: int) -> list[OutputRow]:
        encoder = self.encoders[record_type]
        names = [name for name, _ in encoder.fields]
        columns = out.columns(record_type, [*names, *KEY_COLUMNS.get(record_type, [])])
        if record_type == LATE:  # only the windows compare a late record with a horizon
            columns["watermark_ms"] = np.where(
                columns["stage"] == WINDOW_STAGE, columns["watermark_ms"], np.nan
            )
        values = encoder.encode(columns, count, self.headers.get(record_type, b""))
        topic, partitions = self.topics[record_type], self.partitions[record_type]
        partition = {thing: thing_partition(thing, partitions) for thing in set(columns["thing"])}
        return [
            (topic, key, value, partition[thing], None)
            for key, value, thing in zip(
                _keys(record_type, columns), values, columns["thing"], strict=True
            )
        ]

    def _dead_letters(self, out: OutputRows) -> list[OutputRow]:
        """As ``dead_letters.route``: the record as it came, to the dead-letter topic, with
        the reason and where it was in its headers."""
        columns = out.columns(
            dead_letters.RECORD_TYPE, [name for name, _ in dead_letters.OUTPUT_FIELDS]
        )
        rows: list[OutputRow] = []
        for key, value, partition, offset in zip(
            columns["undecodable_key"],
            columns["undecodable_value"],
            columns["source_partition"],
            columns["source_offset"],
            strict=True,
        ):
            fields = wire_dead_letters.record_fields(
                dead_letters.REASON,
                (wire_dead_letters.STAGE, self.stage),
                self.source_topic,
                str(partition),
                str(offset),
                None if value is None else str(len(value)),  # Spark: length(null) is null
            )
            headers = [(name, None if text is None else text.encode()) for name, text in fields]
            rows.append((self.dlq_topic, key, value, int(partition) % self.dlq_partitions, headers))
        return rows
