"""python -m spark_jobs.aggregate: event-time window aggregates per (thing, quantity), exactly once.

Reads the raw topic (read_committed), keeps tumbling (default 10 s), optional sliding and
optional session windows per (thing, quantity) with count, mean, min, max and sample stddev,
and emits each window once, final, when that key's own event time has passed its end by the
allowed lateness (or the key was idle for the idle timeout). Records too late for their
windows, re-sent, or stamped far in the future go to the late topic with a reason. Output is
Avro (schemas/aggregate.avsc, schemas/late.avsc) with deterministic keys, partitioned by thing,
written through the exactly-once transactional sink. The rules: windowing/windows.py and
docs/windows.md. SIGTERM stops after the current batch (exit 0).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from operators import NO_TIME, Records
from operators.reasons import SUPERSEDED
from spark_jobs import dead_letters, outputs
from spark_jobs.config import AggregateSettings
from spark_jobs.job import StreamingJob
from spark_jobs.output_columns import OutputRows
from spark_jobs.runner import observe_event_time, read_kafka, read_measurements, topic_partitions
from spark_jobs.stateful import MEASUREMENT_COLUMNS, OperatorFunction
from streamkit.durations import duration_ms
from streamkit.wire import schema_text
from streamkit.wire.registry import header as registry_header
from windowing import STAGE, Step, WindowOperator, WindowRules

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger("spark_jobs.aggregate")
SERVICE = "spark_aggregate"


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


def measurements(spark: SparkSession, settings: AggregateSettings) -> DataFrame:
    """The input, with MEASUREMENT_COLUMNS."""
    if settings.source == "joined":
        return read_join_results(spark, settings)
    return read_measurements(spark, settings).select(*MEASUREMENT_COLUMNS)


#: What the state function hands back: aggregates and late records as plain columns (Avro and
#: keys are Spark expressions in ``to_kafka_records``).
OUTPUT_FIELDS: list[tuple[str, str]] = [
    ("record_type", "string"),
    ("thing", "string"),
    ("quantity", "string"),
    ("window_kind", "string"),
    ("window_size_ms", "long"),
    ("window_slide_ms", "long"),
    ("window_label", "string"),
    ("window_start_ms", "long"),
    ("window_end_ms", "long"),
    ("count", "long"),
    ("mean", "double"),
    ("min", "double"),
    ("max", "double"),
    ("stddev", "double"),
    ("closed_at_ms", "long"),
    ("event_time_ms", "long"),
    ("value", "double"),
    ("row_id", "string"),
    ("reason", "string"),
    ("watermark_ms", "long"),
    *dead_letters.OUTPUT_FIELDS,
]
OUTPUT_SCHEMA = ", ".join(f"{name} {kind}" for name, kind in OUTPUT_FIELDS)
#: Long columns that may be null (a record compared with no horizon yet; windows have none; a
#: window an idle flush closed has no record that closed it).
NULLABLE = frozenset({"watermark_ms", "closed_at_ms"})


def window_rows(
    out: OutputRows, key: tuple, batch: Records, step: Step, tags: dict[str, Any]
) -> None:
    """Renders what the windows operator emitted for a (thing, quantity) as output rows: final
    windows, set-aside records and superseded copies (each kind's other columns are filler)."""
    import numpy as np

    thing, quantity = key

    def nullable(times: list[int]) -> np.ndarray:
        return np.array([np.nan if t == NO_TIME else t for t in times], dtype=np.float64)

    if step.windows:
        w = step.windows
        out.add(
            len(w),
            record_type="aggregate",
            thing=thing,
            quantity=quantity,
            window_kind=[x.spec.kind for x in w],
            window_label=[x.spec.label for x in w],
            window_size_ms=[x.spec.size_ms for x in w],
            window_slide_ms=[x.spec.slide_ms for x in w],
            window_start_ms=[x.start_ms for x in w],
            window_end_ms=[x.end_ms for x in w],
            count=[x.count for x in w],
            mean=[x.mean for x in w],
            min=[x.min for x in w],
            max=[x.max for x in w],
            # NaN reaches Spark as null
            stddev=[np.nan if x.stddev is None else x.stddev for x in w],
            closed_at_ms=[np.nan if x.closed_at_ms is None else x.closed_at_ms for x in w],
            **tags,
        )
    if step.aside:
        at = np.array([a.index for a in step.aside], dtype=np.int64)
        out.add(
            len(at),
            record_type="late",
            thing=thing,
            quantity=quantity,
            event_time_ms=batch.event_time_ms[at],
            value=batch.value[at],
            row_id=batch.row_id[at],
            reason=[a.reason for a in step.aside],
            watermark_ms=nullable([a.horizon_ms for a in step.aside]),
            **tags,
        )
    if step.superseded:
        s = step.superseded
        out.add(
            len(s),
            record_type="late",
            thing=thing,
            quantity=quantity,
            reason=SUPERSEDED,
            event_time_ms=[x.time_ms for x in s],
            value=[x.value for x in s],
            row_id=[x.row_id for x in s],
            watermark_ms=nullable([x.horizon_ms for x in s]),
            **tags,
        )


def window_function(rules: WindowRules, idle_timeout: timedelta) -> OperatorFunction:
    """The per-(thing, quantity) function Spark calls with the key's rows of one micro-batch, or
    without rows when its idle timer fired (Spark's processing-time timeout)."""
    return OperatorFunction(
        WindowOperator(rules, idle_timeout),
        window_rows,
        OUTPUT_FIELDS,
        NULLABLE,
        timers=bool(idle_timeout),
    )


def window_records(measured: DataFrame, rules: WindowRules, idle_timeout: timedelta) -> DataFrame:
    """Aggregates and late records (OUTPUT_SCHEMA rows) from a measurement stream."""
    return window_function(rules, idle_timeout).apply(measured.groupBy("thing", "quantity"))


def to_kafka_records(
    records: DataFrame, settings: AggregateSettings, partitions: dict[str, int]
) -> DataFrame:
    """Windows keyed thing|quantity|window|start and late records keyed as in the raw topic,
    both partitioned by thing (streamkit.wire.keys, as the bridge)."""
    from pyspark.sql import functions as F

    routes = [
        outputs.aggregate_route(
            settings.aggregates_topic,
            partitions[settings.aggregates_topic],
            registry_header(settings, settings.aggregates_topic, "aggregate"),
        ),
        outputs.late_route(
            settings.late_topic,
            partitions[settings.late_topic],
            F.lit(STAGE),
            F.col("watermark_ms"),
            header=registry_header(settings, settings.late_topic, "late"),
        ),
    ]
    return outputs.to_kafka_records(
        records,
        routes,
        dlq_topic=settings.dlq_topic,
        dlq_partitions=partitions[settings.dlq_topic],
        source_topic=settings.joined_topic if settings.source == "joined" else settings.raw_topic,
        stage=STAGE,
    )


def build(settings: AggregateSettings) -> Callable[[SparkSession], DataFrame]:
    rules, idle = settings.window_rules(), settings.idle_flush()
    partitions = {
        topic: topic_partitions(settings, topic)
        for topic in (settings.aggregates_topic, settings.late_topic, settings.dlq_topic)
    }

    def output(spark: SparkSession) -> DataFrame:
        log.info(
            "aggregate query",
            extra={
                "windows": [s.label for s in rules.specs],
                "allowed_lateness_ms": rules.allowed_lateness_ms,
                "idle_timeout_ms": duration_ms(idle),
                "max_future_ms": rules.max_future_ms,
                "partitions": partitions,
            },
        )
        return to_kafka_records(
            window_records(measurements(spark, settings), rules, idle), settings, partitions
        )

    return output


def check(settings: AggregateSettings) -> None:
    """Fail at start-up, before Spark, on a bad source or window rule (ValueError: a usage
    error)."""
    if settings.source not in ("raw", "joined"):
        raise ValueError(f"--source must be raw or joined, not {settings.source!r}")
    settings.window_rules()


JOB = StreamingJob(
    SERVICE,
    "spark_jobs.aggregate",
    __doc__,
    AggregateSettings,
    lambda s: s.default_query,
    build,
    check,
)
main = JOB.main


if __name__ == "__main__":
    sys.exit(main())
