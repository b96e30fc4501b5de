"""The Kafka records of the jobs' outputs, built by Spark from the state functions' plain rows.

Each output kind (joined pair, window aggregate, late record) is a route: the ``record_type``
that marks its rows, its topic, its deterministic key, its Avro value and its partition (by
thing, so a thing's results keep their order for whoever reads them). The join, the aggregate
and the single pass pick the routes they emit; undecodable input goes to the dead-letter topic
(``spark_jobs.dead_letters``). Encoding in the JVM (``to_avro``) instead of the Python worker
keeps the worker's time for the state functions.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from spark_jobs import dead_letters

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

JOINED, AGGREGATE, LATE = "joined", "aggregate", "late"


@dataclass(frozen=True)
class Route:
    record_type: str
    topic: str
    partitions: int
    key: Column
    value: Column


def framed(value: Column, header: bytes) -> Column:
    """``value`` opened by the schema registry's header (streamkit.wire.registry); unchanged
    without one."""
    from pyspark.sql import functions as F

    return F.concat(F.lit(header), value) if header else value


def joined_route(topic: str, partitions: int, header: bytes = b"") -> Route:
    """A pair: keyed by its deterministic id."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import to_avro

    from streamkit.wire import schema_text

    value = to_avro(F.struct(*schema_fields("joined")), schema_text("joined"))
    return Route(JOINED, topic, partitions, F.col("id"), framed(value, header))


def schema_fields(schema: str) -> list[str]:
    """The fields of an Avro schema in order: the columns its value is built from, by the same
    names, so a field added to the schema cannot be left out of the record."""
    from streamkit.wire import schema_text

    return [f["name"] for f in json.loads(schema_text(schema))["fields"]]


def aggregate_route(topic: str, partitions: int, header: bytes = b"") -> Route:
    """A final window: keyed thing|quantity|window|start."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import to_avro

    from streamkit.wire import aggregate_key_column, schema_text

    value = to_avro(F.struct(*schema_fields("aggregate")), schema_text("aggregate"))
    return Route(AGGREGATE, topic, partitions, aggregate_key_column(), framed(value, header))


def late_route(
    topic: str, partitions: int, stage: Column, watermark: Column, header: bytes = b""
) -> Route:
    """A record set aside, keyed as in the raw topic; ``stage`` and ``watermark`` say which
    stage set it aside and what it was compared with."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import to_avro

    from streamkit.wire import record_key_column, schema_text

    value = to_avro(
        F.struct(
            "thing",
            "quantity",
            "event_time_ms",
            "value",
            "row_id",
            "reason",
            stage.alias("stage"),
            watermark.cast("long").alias("watermark_ms"),
        ),
        schema_text("late"),
    )
    return Route(LATE, topic, partitions, record_key_column(), framed(value, header))


def encoded_route(record_type: str, topic: str, partitions: int) -> Route:
    """A record the state function encoded itself (``avro_key``, ``avro_value``, the registry's
    header in front when on): the operation statistics' cycles and overload alerts."""
    from pyspark.sql import functions as F

    return Route(record_type, topic, partitions, F.col("avro_key"), F.col("avro_value"))


def to_kafka_records(
    rows: DataFrame,
    routes: list[Route],
    *,
    dlq_topic: str,
    dlq_partitions: int,
    source_topic: str,
    stage: str,
) -> DataFrame:
    """The sink's columns (topic, key, value, partition, headers) for rows of the given routes
    and dead letters."""
    from pyspark.sql import functions as F

    from streamkit.wire import thing_partition_column

    def choose(pick) -> Column:
        first, *others = routes
        column = F.when(F.col("record_type") == first.record_type, pick(first))
        for route in others:
            column = column.when(F.col("record_type") == route.record_type, pick(route))
        return column

    return rows.select(
        *dead_letters.route(
            {
                "topic": choose(lambda r: F.lit(r.topic)),
                "key": choose(lambda r: r.key).cast("binary"),
                "value": choose(lambda r: r.value),
                "partition": choose(lambda r: thing_partition_column(r.partitions)).cast("int"),
            },
            dlq_topic=dlq_topic,
            dlq_partitions=dlq_partitions,
            source_topic=source_topic,
            stage=stage,
        )
    )
