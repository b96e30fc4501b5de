"""Kafka keys, the Thing partitioner and the machines' MQTT topics (sharded by the same rule),
for every writer and reader of the pipeline's topics.

Key of a measurement (raw topic, late records): ``<thing>|<quantity>|<event time ms>``,
deterministic, so a redelivered or replayed row produces byte-identical records that collapse
under compaction and can be recognised downstream. Key of an aggregate:
``<thing>|<quantity>|<window label>|<window start ms>``.

Things and quantities are names by the one rule of streamkit.identifiers (no ``|``, no MQTT
wildcard or level in a Thing, ...), checked where names come in (the bridge's row parser):
the writers here trust that and stay cheap; the readers and the MQTT topic check it.

Partition: from the thing alone (crc32), so each (thing, quantity) stream stays in one
partition, in order, in every topic; the default partitioner would hash the whole key and
scatter a thing's records over all partitions. The Spark jobs compute the same partition as a
column (:func:`thing_partition_column`).
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, NamedTuple

from streamkit.identifiers import quantity_problem, thing_problem

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
    """Inverse of :func:`record_key`. ValueError if it is not such a key, names included: a
    valid name holds no ``|``, so a key has exactly three parts."""
    thing, quantity, time_text = key.decode().split(SEPARATOR)
    problem = thing_problem(thing) or quantity_problem(quantity)
    if problem is not None:
        raise ValueError(f"not a record key: {problem}")
    event_time_ms = int(time_text)
    if str(event_time_ms) != time_text:  # "+1", " 1", "1_0", "０" are no key's time
        raise ValueError(
            f"not a record key: time {time_text[:40]!r} is not as record_key writes it"
        )
    return RecordKey(thing, quantity, event_time_ms)


def aggregate_key(thing: str, quantity: str, window_label: str, window_start_ms: int) -> bytes:
    """The key of one window aggregate (aggregates topic): one key per window, so a replayed
    window overwrites itself."""
    return f"{thing}|{quantity}|{window_label}|{window_start_ms}".encode()


def cycle_key(thing: str, component: str, rating_id: str, cycle_start_ms: int) -> bytes:
    """The key of one component's reference cycle (opstats topic): one key per cycle and
    rating, so a replayed cycle overwrites itself and one of another rating never does."""
    return f"{thing}|{component}|{rating_id}|{cycle_start_ms}".encode()


def overload_key(thing: str, component: str) -> bytes:
    """The key of a component's overload alerts (overloads topic, compacted): one key per
    component, so what compaction keeps is its latest alert state."""
    return f"{thing}|{component}".encode()


def thing_partition(thing: str, partitions: int) -> int:
    """The partition of every record of ``thing`` in a topic of ``partitions`` partitions."""
    return zlib.crc32(thing.encode()) % partitions


def machine_topic(prefix: str, thing: str, shards: int = 1) -> str:
    """The MQTT topic ``thing`` publishes to: ``<prefix>/<thing>``, or with ``shards`` bridges
    ``<prefix>/<shard>/<thing>``, the shard from the thing alone as its partition is, so that
    each Thing has exactly one bridge (the one subscribed to ``<prefix>/<shard>/#``) and, with
    the raw partition count a multiple of the shards, each bridge writes only its partitions.
    ValueError for a Thing that is not a valid name: it could be several topic levels, or a
    wildcard (the publisher computes a Thing's topic once)."""
    problem = thing_problem(thing)
    if problem is not None:
        raise ValueError(problem)
    return (
        f"{prefix}/{thing_partition(thing, shards)}/{thing}" if shards > 1 else f"{prefix}/{thing}"
    )


def shard_prefix(prefix: str, shard: int, shards: int) -> str:
    """The topic prefix bridge ``shard`` of ``shards`` subscribes under (``<prefix>/<shard>``)."""
    return f"{prefix}/{shard}" if shards > 1 else prefix


def thing_partition_column(partitions: int, thing: str = "thing") -> Column:
    """:func:`thing_partition` as a Spark column (Spark's crc32 is zlib's, unsigned)."""
    from pyspark.sql import functions as F

    return F.pmod(F.crc32(F.encode(thing, "UTF-8")), F.lit(partitions))


def record_key_column(
    thing: str = "thing", quantity: str = "quantity", event_time_ms: str = "event_time_ms"
) -> Column:
    """:func:`record_key` as a Spark (string) column."""
    from pyspark.sql import functions as F

    return F.concat_ws(SEPARATOR, thing, quantity, F.col(event_time_ms).cast("string"))


def aggregate_key_column(
    thing: str = "thing",
    quantity: str = "quantity",
    window_label: str = "window_label",
    window_start_ms: str = "window_start_ms",
) -> Column:
    """:func:`aggregate_key` as a Spark (string) column."""
    from pyspark.sql import functions as F

    return F.concat_ws(
        SEPARATOR, thing, quantity, window_label, F.col(window_start_ms).cast("string")
    )
