"""python -m spark_jobs.aggregate: event-time window aggregates per (thing, quantity), exactly once.

Reads the raw topic (read_committed), keeps tumbling (default 10 s), optional sliding and
optional session windows per (thing, quantity) with count, mean, min, max and sample stddev,
and emits each window once, final, when that key's own event time has passed its end by the
allowed lateness (or the key was idle for the idle timeout). Records too late for their
windows, re-sent, or stamped far in the future go to the late topic with a reason. Output is
Avro (schemas/aggregate.avsc, schemas/late.avsc) with deterministic keys, partitioned by thing,
written through the exactly-once transactional sink. The state is kept per thing (each
quantity's windows inside it), so a thing's names are bounded (THING_MAX_QUANTITIES) and a silent
thing is dropped (STATE_RETENTION). The rules: windowing/windows.py and docs/windows.md. SIGTERM
stops after the current batch (exit 0).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from spark_jobs import outputs
from spark_jobs.config import AggregateSettings
from spark_jobs.job import StreamingJob
from spark_jobs.outputs import AGGREGATE, LATE
from spark_jobs.passes import window_records
from spark_jobs.source import output_partitions, window_input
from streamkit.durations import duration_ms
from windowing import STAGE

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger("spark_jobs.aggregate")
SERVICE = "spark_aggregate"


def to_kafka_records(
    records: DataFrame, settings: AggregateSettings, partitions: dict[str, int]
) -> DataFrame:
    """Windows keyed thing|quantity|window|start and late records keyed as in the raw topic,
    both partitioned by thing (streamkit.wire.keys, as the bridge)."""
    from pyspark.sql import functions as F

    topics = outputs.output_topics(settings, (AGGREGATE, LATE))
    routes = outputs.routes(settings, topics, partitions, F.col("stage"), F.col("watermark_ms"))
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
    partitions = output_partitions(settings, (settings.aggregates_topic, settings.late_topic))

    def output(spark: SparkSession) -> DataFrame:
        log.info(
            "aggregate query",
            extra={
                "windows": [s.label for s in rules.specs],
                "allowed_lateness_ms": rules.allowed_lateness_ms,
                "idle_timeout_ms": duration_ms(idle),
                "state_retention_ms": duration_ms(settings.retention()),
                "max_quantities": settings.max_quantities,
                "max_future_ms": rules.max_future_ms,
                "partitions": partitions,
            },
        )
        return to_kafka_records(
            window_records(window_input(spark, settings), settings),
            settings,
            partitions,
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
