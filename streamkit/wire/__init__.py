"""The wire contract: everything the services agree on about the bytes between them (Kafka
keys and partitions, window labels, dead-letter headers, Avro in both directions), in one
place in the core so that a writer and its readers cannot drift apart."""

from streamkit.wire.avro import (
    ADDED_LAST,
    AvroCodec,
    MeasurementEncoder,
    avro_double,
    avro_long,
    avro_string,
    parsed_schema,
    read_long,
    read_record,
    schema_before,
    schema_text,
    split_measurement,
)
from streamkit.wire.keys import (
    RecordKey,
    aggregate_key,
    aggregate_key_column,
    cycle_key,
    machine_topic,
    overload_key,
    parse_record_key,
    record_key,
    record_key_column,
    shard_prefix,
    thing_partition,
    thing_partition_column,
)
from streamkit.wire.labels import WindowLabel, parse_window_label, window_label

__all__ = [
    "ADDED_LAST",
    "AvroCodec",
    "MeasurementEncoder",
    "RecordKey",
    "WindowLabel",
    "aggregate_key",
    "aggregate_key_column",
    "cycle_key",
    "overload_key",
    "avro_double",
    "avro_long",
    "avro_string",
    "machine_topic",
    "parse_record_key",
    "parse_window_label",
    "parsed_schema",
    "read_long",
    "read_record",
    "record_key",
    "record_key_column",
    "schema_before",
    "schema_text",
    "shard_prefix",
    "split_measurement",
    "thing_partition",
    "thing_partition_column",
    "window_label",
]
