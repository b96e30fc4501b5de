"""python -m spark_jobs.single_pass: the join and the window aggregates in one stateful pass
per thing.

One Spark application reads and decodes the raw topic once, hands each thing's records of a
micro-batch once to Python, and writes joined pairs, final windows, late records and dead
letters in one transaction per batch. Run as two jobs (``spark_jobs.join`` and
``spark_jobs.aggregate``) the same work costs two JVMs, two reads and decodes of every record,
two Arrow round trips and two transactions per batch.

The output is, record for record, what the two jobs write: the thing's operator composes the
join operator and, per quantity, the windows operator (``operators.compose``: ``Together`` of
the join and ``ByQuantity`` of the windows), each part with its own state nested in the thing's
snapshot, so the join's and the windows' properties hold unchanged. Only the idle timeout
moves: Spark's timer is per thing, so each quantity keeps its own deadline in its state and
the thing's timer is set to the earliest; a quantity falls idle as before even while the
thing's other quantities keep coming.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from operators.keyed import KeyedStates
from spark_jobs import driver_state, operation_stats, outputs
from spark_jobs.config import SinglePassSettings
from spark_jobs.driver_outputs import SCHEMAS, KafkaOutputs
from spark_jobs.eos_sink import ExactlyOnceSink
from spark_jobs.job import StreamingJob
from spark_jobs.outputs import AGGREGATE, JOINED, LATE
from spark_jobs.passes import (
    join_plan,
    limited,
    output_fields,
    statistics_rows,
    thing_operator,
    thing_pass,
)
from spark_jobs.renderers import NULLABLE, thing_rows
from spark_jobs.sinks import BatchStage
from spark_jobs.source import output_partitions, read_measurements
from spark_jobs.stateful import MEASUREMENT_COLUMNS
from streamkit.wire.registry import header as registry_header
from windowing import STAGE as WINDOW_STAGE

if TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger("spark_jobs.single_pass")
SERVICE = "spark_single_pass"
QUERY = "single-pass"  #: the query's name unless SPARK_QUERY_NAME gives one
STAGE = "single_pass"  #: the dead letters' stage; late records keep the join's or the aggregate's


def output_topics(settings: SinglePassSettings) -> dict[str, str]:
    """Kind -> topic of what the job writes: pairs, windows, late records, the statistics'."""
    kinds = (JOINED, AGGREGATE, LATE, *operation_stats.kinds(settings))
    return outputs.output_topics(settings, kinds)


def to_kafka_records(
    rows: DataFrame, settings: SinglePassSettings, partitions: dict[str, int]
) -> DataFrame:
    """Pairs, windows and late records, keyed and partitioned as the two jobs write them."""
    from pyspark.sql import functions as F

    stage = F.col("stage")
    watermark = F.when(stage == WINDOW_STAGE, F.col("watermark_ms"))
    return outputs.to_kafka_records(
        rows,
        outputs.routes(settings, output_topics(settings), partitions, stage, watermark),
        dlq_topic=settings.dlq_topic,
        dlq_partitions=partitions[settings.dlq_topic],
        source_topic=settings.raw_topic,
        stage=STAGE,
    )


def build(settings: SinglePassSettings) -> Callable[[SparkSession], DataFrame]:
    """The job's query: raw measurements in, Kafka records out; with the state in the driver,
    the measurements with their batch's time (``spark_jobs.driver_state``)."""
    log.info(
        "the things' state",
        extra={
            "placed": settings.placed_state(),
            "spark_state": settings.state,
            "spark_master": settings.spark_master,
            "spark_sink": settings.sink,
        },
    )
    if settings.state_in_driver():
        return driver_query(settings)
    function = thing_pass(settings)
    partitions = output_partitions(settings, output_topics(settings).values())

    def query(spark: SparkSession) -> DataFrame:
        rows = function.apply(
            read_measurements(spark, settings).select(*MEASUREMENT_COLUMNS).groupBy("thing")
        )
        return to_kafka_records(rows, settings, partitions)

    return query


def driver_query(settings: SinglePassSettings) -> Callable[[SparkSession], DataFrame]:
    """The raw measurements, a heartbeat when timers must fire without records (not in a
    backfill: it ends once caught up), and the batch's time."""
    heartbeat = bool(settings.idle_flush()) and not settings.available_now

    def query(spark: SparkSession) -> DataFrame:
        rows = read_measurements(spark, settings).select(*MEASUREMENT_COLUMNS)
        if heartbeat:
            rows = driver_state.with_heartbeat(spark, rows)
        return driver_state.with_batch_time(rows)

    return query


def driver_batches(settings: SinglePassSettings) -> BatchStage | None:
    """With the state in the driver: each batch through the things' table into the sink."""
    if not settings.state_in_driver():
        return None
    operator = limited(thing_operator(settings, join_plan(settings)), settings)
    partitions = output_partitions(settings, output_topics(settings).values())
    topics = output_topics(settings)
    kafka_outputs = KafkaOutputs(
        topics,
        {kind: partitions[topic] for kind, topic in topics.items()},
        {kind: registry_header(settings, topics[kind], SCHEMAS[kind]) for kind in SCHEMAS},
        dlq_topic=settings.dlq_topic,
        dlq_partitions=partitions[settings.dlq_topic],
        source_topic=settings.raw_topic,
        stage=STAGE,
    )
    render = thing_rows(statistics_rows(settings))

    def around(sink: ExactlyOnceSink, checkpoint: Path) -> driver_state.DriverStateBatches:
        return driver_state.DriverStateBatches(
            KeyedStates(operator),
            render,
            output_fields(settings),
            NULLABLE,
            kafka_outputs,
            sink,
            driver_state.StateFiles(checkpoint),
        )

    return around


def check(settings: SinglePassSettings) -> None:
    """Fail fast on bad JOIN_PAIRS, window rules, OPSTATS_POWER or machine catalogue, before
    Spark starts."""
    thing_operator(settings, join_plan(settings))
    if settings.state == "driver" and settings.sink != "driver":
        raise ValueError(
            "SPARK_STATE=driver produces from the driver: it needs SPARK_SINK=driver "
            "(or SPARK_STATE=executors with SPARK_SINK=executors)"
        )


JOB = StreamingJob(
    SERVICE,
    "spark_jobs.single_pass",
    __doc__,
    SinglePassSettings,
    lambda _: QUERY,
    build,
    check,
    batches=driver_batches,
)
main = JOB.main


if __name__ == "__main__":
    sys.exit(main())
