"""Where every job's records come from: Kafka topics as streaming DataFrames, decoded, with the
options all jobs share, and the partition counts of the topics they write.

A job reads through here and writes through :mod:`spark_jobs.outputs`; the batch's newest event
time is observed here for :mod:`spark_jobs.listener`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from spark_jobs import dead_letters
from spark_jobs.config import AggregateSettings, SparkJobSettings
from spark_jobs.stateful import MEASUREMENT_COLUMNS
from streamkit.kafka_clients import owned_name, partition_count, spark_kafka_options
from streamkit.wire import schema_text

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def read_measurements(
    spark: SparkSession, settings: SparkJobSettings, topic: str | None = None
) -> DataFrame:
    """The raw topic as a streaming DataFrame of decoded measurements.

    Columns: thing, quantity, event_time_ms, value, row_id (as in schemas/measurement.avsc),
    ``event_time`` (a timestamp column), ``kafka_partition`` and ``kafka_offset`` (arrival
    order: a thing lives in one partition), and the dead-letter columns: a record that does not
    decode is a row without a thing that keeps its key and value (spark_jobs.dead_letters).
    read_committed so aborted bridge output never enters; failOnDataLoss per settings (default
    true: vanished offsets are an error, while compaction gaps and transaction markers are
    handled by the connector either way).
    """
    from pyspark.sql import functions as F

    decoded = dead_letters.decode(
        read_kafka(spark, settings, topic or settings.raw_topic),
        schema_text("measurement"),
        framed=settings.schema_registry,
    )
    measurements = decoded.select(
        "d.*", *dead_letters.INPUT_COLUMNS, "kafka_partition", "kafka_offset"
    )
    return observe_event_time(
        measurements.withColumn("event_time", F.timestamp_millis("event_time_ms"))
    )


#: Name of the observed metric with the newest event time a batch read (spark_jobs.listener).
EVENT_TIME_METRIC = "event_time"


def observe_event_time(frame: DataFrame) -> DataFrame:
    """Report each batch's newest event time in its progress: the jobs keep event time per key,
    so there is no query watermark to show how far event time got."""
    from pyspark.sql import functions as F

    return frame.observe(EVENT_TIME_METRIC, F.max("event_time_ms").alias("newest_ms"))


def read_kafka(spark: SparkSession, settings: SparkJobSettings, topic: str) -> DataFrame:
    """A topic as a streaming DataFrame of Kafka records, with the options every job shares."""
    return (
        spark.readStream.format("kafka")
        .options(**spark_kafka_options(settings))
        .option("subscribe", topic)
        # the job's own consumer groups (its Kafka user may use no other)
        .option("groupIdPrefix", owned_name(settings, "spark-kafka-source"))
        .option("startingOffsets", settings.starting_offsets)
        .option("maxOffsetsPerTrigger", str(settings.max_offsets_per_trigger))
        .option("kafka.isolation.level", "read_committed")
        # Bigger fetches than the client defaults (1 MiB per partition, 500 records a poll):
        # ~20% shorter micro-batches at 200k records (benchmarks/bench_join.py).
        .option("kafka.max.partition.fetch.bytes", str(16 << 20))
        .option("kafka.fetch.max.bytes", str(64 << 20))
        .option("kafka.max.poll.records", "100000")
        .option("failOnDataLoss", "true" if settings.fail_on_data_loss else "false")
        .load()
    )


def topic_partitions(settings: SparkJobSettings, topic: str) -> int:
    """Partition count of an output topic, for jobs that choose partitions themselves."""
    return partition_count(settings, topic)


def read_join_results(spark: SparkSession, settings: AggregateSettings) -> DataFrame:
    """The joined topic as measurements: quantity = the pair's result name, followed by
    ``_<component>`` for a pattern pair's (``mechanical_power_C12``: each component its own
    series), value = its result, event time = the pair's (the later input's), row_id = the
    pair's id."""
    from pyspark.sql import functions as F

    pairs = dead_letters.decode(
        read_kafka(spark, settings, settings.joined_topic),
        schema_text("joined"),
        framed=settings.schema_registry,
        evolved="joined",
    )
    component = F.col("d.component")
    return observe_event_time(
        pairs.select(
            F.col("d.thing").alias("thing"),
            F.when((component.isNull()) | (component == ""), F.col("d.result_name"))
            .otherwise(F.concat(F.col("d.result_name"), F.lit("_"), component))
            .alias("quantity"),
            "d.event_time_ms",
            F.col("d.result").alias("value"),
            F.col("d.id").alias("row_id"),
            "kafka_partition",
            "kafka_offset",
            *dead_letters.INPUT_COLUMNS,
        )
    )


def output_partitions(settings: SparkJobSettings, topics: Iterable[str]) -> dict[str, int]:
    """Each topic a job writes, and its dead letters' topic, with its partition count (asked
    once, at start)."""
    return {topic: topic_partitions(settings, topic) for topic in [*topics, settings.dlq_topic]}


def window_input(spark: SparkSession, settings: AggregateSettings) -> DataFrame:
    """The input, with MEASUREMENT_COLUMNS."""
    if settings.source == "joined":
        return read_join_results(spark, settings)
    return read_measurements(spark, settings).select(*MEASUREMENT_COLUMNS)
