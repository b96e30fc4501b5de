"""Kafka keys, the Thing partitioner and the machines' MQTT topics (sharded by the same rule),
for every writer and reader of the pipeline's topics.

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


def machine_topic(prefix: str, thing: str, shards: int = 1) -> str:
    """The MQTT topic ``thing`` publishes to: ``<prefix>/<thing>``, or with ``shards`` bridges
    ``<prefix>/<shard>/<thing>``, the shard from the thing alone as its partition is, so that
    each Thing has exactly one bridge (the one subscribed to ``<prefix>/<shard>/#``) and, with
    the raw partition count a multiple of the shards, each bridge writes only its partitions."""
    return f"{prefix}/{thing_partition(thing, shards)}/{thing}" if shards > 1 else f"{prefix}/{thing}"


def shard_prefix(prefix: str, shard: int, shards: int) -> str:
    """The topic prefix bridge ``shard`` of ``shards`` subscribes under (``<prefix>/<shard>``)."""
    return f"{prefix}/{shard}" if shards > 1 else prefix


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
