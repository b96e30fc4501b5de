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

import sys
from typing import TYPE_CHECKING, Any

from lsb import JoinOperator
from lsb.plan import JoinPlan
from operators import ByQuantity, KeyedOperator, Together
from spark_jobs import aggregate, dead_letters, join, operation_stats, outputs
from spark_jobs.config import SinglePassSettings
from spark_jobs.job import StreamingJob
from spark_jobs.output_columns import Fields
from spark_jobs.stateful import (
    MEASUREMENT_COLUMNS,
    OperatorFunction,
    PartRows,
    QuantityRows,
    Render,
)
from streamkit.wire.registry import header as registry_header
from windowing import WindowOperator

if TYPE_CHECKING:
    from pathlib import Path

    from pyspark.sql import DataFrame, SparkSession

    from spark_jobs.eos_sink import ExactlyOnceSink
    from spark_jobs.runner import BatchStage

SERVICE = "spark_single_pass"
QUERY = "single-pass"  #: the query's name unless SPARK_QUERY_NAME gives one
STAGE = "single_pass"  #: the dead letters' stage; late records keep the join's or the aggregate's


def _wider(*field_lists: Fields) -> Fields:
    """Every column of the lists once, in first-seen order, dead-letter columns last."""
    seen: dict[str, str] = {}
    for name, kind in (
        f for fields in field_lists for f in fields if f not in dead_letters.OUTPUT_FIELDS
    ):
        if seen.setdefault(name, kind) != kind:
            raise TypeError(f"column {name} is {seen[name]} in one job and {kind} in another")
    return [*seen.items(), *dead_letters.OUTPUT_FIELDS]


#: The join's and the aggregate's columns, plus which stage set a late record aside.
OUTPUT_FIELDS: Fields = _wider(join.OUTPUT_FIELDS, aggregate.OUTPUT_FIELDS, [("stage", "string")])
OUTPUT_SCHEMA = ", ".join(f"{name} {kind}" for name, kind in OUTPUT_FIELDS)


def output_fields(settings: SinglePassSettings) -> Fields:
    """The columns, with the statistics' encoded records when they run."""
    on = operation_stats.enabled(settings)
    return operation_stats.with_encoded(OUTPUT_FIELDS) if on else OUTPUT_FIELDS


def thing_rows(statistics: operation_stats.StatsRows | None = None) -> PartRows:
    """Renders what the thing's operator emitted: the join's part as the join job does, each
    quantity's windows as the aggregate job does, the statistics' cycles when they run, each
    tagged with its stage. Picklable."""
    renders: dict[str, Render] = {
        join.STAGE: join.JoinRows(),
        aggregate.STAGE: QuantityRows(aggregate.window_rows),
    }
    if statistics is not None:
        renders[operation_stats.STAGE] = statistics
    return PartRows(renders)


def thing_operator(settings: SinglePassSettings, plan: JoinPlan) -> Together:
    """The join on its quantities and every quantity's windows, on one thing's records; with
    OPSTATS_POWER, the operation statistics of every component too."""
    parts: list[tuple[str, KeyedOperator, Any]] = [
        (
            join.STAGE,
            JoinOperator(plan, settings.max_future, settings.idle_flush()),
            plan.selects,
        ),
        (
            aggregate.STAGE,
            ByQuantity(WindowOperator(settings.window_rules(), settings.idle_flush())),
            None,
        ),
    ]
    statistics = operation_stats.stats_operator(settings)
    if statistics is not None:
        parts.append((operation_stats.STAGE, statistics, None))
    return Together(*parts)


def statistics_rows(settings: SinglePassSettings) -> operation_stats.StatsRows | None:
    """The statistics' renderer when they run (asks the registry for its headers when on)."""
    return operation_stats.stats_rows(settings) if operation_stats.enabled(settings) else None


def thing_pass(settings: SinglePassSettings) -> OperatorFunction:
    """The per-thing function Spark calls with the thing's rows of one micro-batch, or without
    rows when the earliest idle timer of its parts fired."""
    return OperatorFunction(
        thing_operator(settings, join.join_plan(settings)),
        thing_rows(statistics_rows(settings)),
        output_fields(settings),
        aggregate.NULLABLE,
        timers=bool(settings.idle_flush()),
    )


def to_kafka_records(
    rows: DataFrame, settings: SinglePassSettings, partitions: dict[str, int]
) -> DataFrame:
    """Pairs, windows and late records, keyed and partitioned as the two jobs write them."""
    from pyspark.sql import functions as F

    routes = [
        outputs.joined_route(
            settings.joined_topic,
            partitions[settings.joined_topic],
            registry_header(settings, settings.joined_topic, "joined"),
        ),
        outputs.aggregate_route(
            settings.aggregates_topic,
            partitions[settings.aggregates_topic],
            registry_header(settings, settings.aggregates_topic, "aggregate"),
        ),
        outputs.late_route(
            settings.late_topic,
            partitions[settings.late_topic],
            F.col("stage"),
            F.when(F.col("stage") == aggregate.STAGE, F.col("watermark_ms")),
            header=registry_header(settings, settings.late_topic, "late"),
        ),
        *operation_stats.routes(settings, partitions),
    ]
    return outputs.to_kafka_records(
        rows,
        routes,
        dlq_topic=settings.dlq_topic,
        dlq_partitions=partitions[settings.dlq_topic],
        source_topic=settings.raw_topic,
        stage=STAGE,
    )


def output_partitions(settings: SinglePassSettings) -> dict[str, int]:
    from spark_jobs.runner import topic_partitions

    topics = [
        settings.joined_topic,
        settings.aggregates_topic,
        settings.late_topic,
        settings.dlq_topic,
    ]
    if operation_stats.enabled(settings):
        topics += operation_stats.topics(settings).values()
    return {topic: topic_partitions(settings, topic) for topic in topics}


def build(settings: SinglePassSettings):
    """The job's query: raw measurements in, Kafka records out; with the state in the driver,
    the measurements with their batch's time (``spark_jobs.driver_state``)."""
    from spark_jobs.runner import read_measurements

    if settings.state_in_driver(QUERY):
        return driver_query(settings)
    function = thing_pass(settings)
    partitions = output_partitions(settings)

    def query(spark: SparkSession) -> DataFrame:
        rows = function.apply(
            read_measurements(spark, settings).select(*MEASUREMENT_COLUMNS).groupBy("thing")
        )
        return to_kafka_records(rows, settings, partitions)

    return query


def driver_query(settings: SinglePassSettings):
    """The raw measurements, a heartbeat when timers must fire without records (not in a
    backfill: it ends once caught up), and the batch's time."""
    from spark_jobs import driver_state
    from spark_jobs.runner import read_measurements

    heartbeat = bool(settings.idle_flush()) and not settings.available_now

    def query(spark: SparkSession) -> DataFrame:
        rows = read_measurements(spark, settings).select(*MEASUREMENT_COLUMNS)
        if heartbeat:
            rows = driver_state.with_heartbeat(spark, rows)
        return driver_state.with_batch_time(rows)

    return query


def driver_batches(settings: SinglePassSettings) -> BatchStage | None:
    """With the state in the driver: each batch through the things' table into the sink."""
    if not settings.state_in_driver(QUERY):
        return None
    from operators.keyed import KeyedStates
    from spark_jobs import driver_state
    from spark_jobs.driver_outputs import SCHEMAS, KafkaOutputs
    from spark_jobs.outputs import AGGREGATE, JOINED, LATE

    operator = thing_operator(settings, join.join_plan(settings))
    partitions = output_partitions(settings)
    topics = {
        JOINED: settings.joined_topic,
        AGGREGATE: settings.aggregates_topic,
        LATE: settings.late_topic,
    }
    if operation_stats.enabled(settings):
        topics.update(operation_stats.topics(settings))
    outputs = KafkaOutputs(
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
            aggregate.NULLABLE,
            outputs,
            sink,
            driver_state.StateFiles(checkpoint),
        )

    return around


def check(settings: SinglePassSettings) -> None:
    """Fail fast on bad JOIN_PAIRS, window rules, OPSTATS_POWER or machine catalogue, before
    Spark starts."""
    thing_operator(settings, join.join_plan(settings))
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
