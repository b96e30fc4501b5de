"""The Kafka records of the jobs' outputs, built by Spark from the state functions' plain rows.

Each output kind (joined pair, window aggregate, late record, the statistics' cycle and
overload alert) is a route: the ``record_type`` that marks its rows, its topic, its
deterministic key, its Avro value and its partition (by thing, so a thing's results keep their
order for whoever reads them). :data:`OUTPUT_KINDS` is the one table of the kinds; a job names
the kinds it writes and :func:`routes` makes theirs. Undecodable input goes to the dead-letter
topic (``spark_jobs.dead_letters``). Encoding in the JVM (``to_avro``) instead of the Python worker
keeps the worker's time for the state functions.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from spark_jobs import dead_letters
from spark_jobs.config import SparkJobSettings
from streamkit.wire.registry import header as registry_header

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

JOINED, AGGREGATE, LATE, OPSTATS, OVERLOAD = "joined", "aggregate", "late", "opstats", "overload"


@dataclass(frozen=True)
class OutputKind:
    topic_setting: str  #: the settings' field that names its topic
    schema: str  #: the Avro schema of its value
    encoded: bool = False  #: the state function encodes its records itself


#: Every kind of record a job writes (besides dead letters).
OUTPUT_KINDS: dict[str, OutputKind] = {
    JOINED: OutputKind("joined_topic", "joined"),
    AGGREGATE: OutputKind("aggregates_topic", "aggregate"),
    LATE: OutputKind("late_topic", "late"),
    OPSTATS: OutputKind("opstats_topic", "opstats", encoded=True),
    OVERLOAD: OutputKind("overloads_topic", "overload", encoded=True),
}


def output_topics(settings: SparkJobSettings, kinds: Iterable[str]) -> dict[str, str]:
    """Kind -> topic, for the kinds a job writes."""
    return {kind: getattr(settings, OUTPUT_KINDS[kind].topic_setting) for kind in kinds}


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

    computed = {
        "stage": stage.alias("stage"),
        "watermark_ms": watermark.cast("long").alias("watermark_ms"),
    }
    fields = [computed.get(name, F.col(name)) for name in schema_fields("late")]
    value = to_avro(F.struct(*fields), schema_text("late"))
    return Route(LATE, topic, partitions, record_key_column(), framed(value, header))


def encoded_route(record_type: str, topic: str, partitions: int) -> Route:
    """A record the state function encoded itself (``avro_key``, ``avro_value``, the registry's
    header in front when on): the operation statistics' cycles and overload alerts."""
    from pyspark.sql import functions as F

    return Route(record_type, topic, partitions, F.col("avro_key"), F.col("avro_value"))


def routes(
    settings: SparkJobSettings,
    topics: dict[str, str],
    partitions: dict[str, int],
    late_stage: Column,
    late_watermark: Column,
) -> list[Route]:
    """The route of each kind in ``topics`` (:func:`output_topics`); a late record's ``stage``
    and ``watermark`` columns are the job's (which stage set it aside, what it was compared
    with)."""
    made = []
    for kind, topic in topics.items():
        spec, count = OUTPUT_KINDS[kind], partitions[topic]
        if spec.encoded:  # the registry's header is in front already
            made.append(encoded_route(kind, topic, count))
            continue
        header = registry_header(settings, topic, spec.schema)
        if kind == LATE:
            made.append(late_route(topic, count, late_stage, late_watermark, header))
        else:
            made.append(_ROUTES[kind](topic, count, header))
    return made


#: The routes of the kinds whose value Spark encodes from plain columns (besides late records).
_ROUTES = {JOINED: joined_route, AGGREGATE: aggregate_route}


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
