"""Kafka keys and the Thing partitioner, for every writer and reader of the pipeline's topics.

Key of a measurement (raw topic, late records): ``<thing>|<quantity>|<event time ms>``,
deterministic, so a redelivered or replayed row produces byte-identical records that collapse
under compaction and can be recognised downstream. Key of an aggregate:
``<thing>|<quantity>|<window label>|<window start ms>``.

Partition: from the thing alone (crc32), so each (thing, quantity) stream stays in one
partition, in order, in every topic; the default partitioner would hash the whole key and
scatter a thing's records over all partitions. The Spark jobs compute the same partition as a
column (:func:`thing_partition_column`).
"""
from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from pyspark.sql import Column

SEPARATOR = "|"


class RecordKey(NamedTuple):
    thing: str
    quantity: str
    event_time_ms: int


def record_key(thing: str, quantity: str, event_time_ms: int) -> bytes:
    """The key of one measurement (raw and late topics)."""
    return f"{thing}|{quantity}|{event_time_ms}".encode()


def parse_record_key(key: bytes) -> RecordKey:
    """Inverse of :func:`record_key`. Split from the right, so a thing containing ``|`` still
    parses (quantities and times never contain it). ValueError if it is not such a key."""
    thing, quantity, time_text = key.decode().rsplit(SEPARATOR, 2)
    return RecordKey(thing, quantity, int(time_text))


def aggregate_key(thing: str, quantity: str, window_label: str, window_start_ms: int) -> bytes:
    """The key of one window aggregate (aggregates topic): one key per window, so a replayed
    window overwrites itself."""
    return f"{thing}|{quantity}|{window_label}|{window_start_ms}".encode()


def thing_partition(thing: str, partitions: int) -> int:
    """The partition of every record of ``thing`` in a topic of ``partitions`` partitions."""
    return zlib.crc32(thing.encode()) % partitions


def thing_partition_column(partitions: int, thing: str = "thing") -> "Column":
    """:func:`thing_partition` as a Spark column (Spark's crc32 is zlib's, unsigned)."""
    from pyspark.sql import functions as F

    return F.pmod(F.crc32(F.encode(thing, "UTF-8")), F.lit(partitions))


def record_key_column(thing: str = "thing", quantity: str = "quantity", event_time_ms: str = "event_time_ms") -> "Column":
    """:func:`record_key` as a Spark (string) column."""
    from pyspark.sql import functions as F

    return F.concat_ws(SEPARATOR, thing, quantity, F.col(event_time_ms).cast("string"))


def aggregate_key_column(thing: str = "thing", quantity: str = "quantity", window_label: str = "window_label",
                         window_start_ms: str = "window_start_ms") -> "Column":
    """:func:`aggregate_key` as a Spark (string) column."""
    from pyspark.sql import functions as F

    return F.concat_ws(SEPARATOR, thing, quantity, window_label, F.col(window_start_ms).cast("string"))
