"""python -m spark_jobs.join: the LocalStreamBuffer join as a Spark Structured Streaming job.

Raw measurements (read_committed) are grouped by thing; each group of a micro-batch goes, in
Kafka offset order, through the join operator inside ``applyInPandasWithState``, with its
state snapshot as one binary value per thing in the RocksDB state store. Joined
pairs go to the joined topic, records the library hands back (late, partner timeout) to the
late topic, Avro-encoded by Spark (``to_avro``, in the JVM) and written exactly once by the
runner's transactional sink.

The join is ``lsb.JoinOperator`` run by the one Spark adapter (``spark_jobs.stateful``). With
``OPSTATS_POWER`` set (the default) the operation statistics run beside it in each thing's
state, and their cycles and overload alerts go out in the same transactions
(``spark_jobs.operation_stats``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from spark_jobs import operation_stats, outputs
from spark_jobs.config import JoinSettings
from spark_jobs.job import StreamingJob
from spark_jobs.outputs import JOINED, LATE
from spark_jobs.passes import input_quantities, join_pass, join_plan
from spark_jobs.renderers import JOIN_STAGE
from spark_jobs.source import output_partitions, read_measurements
from spark_jobs.stateful import MEASUREMENT_COLUMNS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def output_topics(settings: JoinSettings) -> dict[str, str]:
    """Kind -> topic of what the job writes: pairs, late records, the statistics' records."""
    return outputs.output_topics(settings, (JOINED, LATE, *operation_stats.kinds(settings)))


def to_kafka_records(
    rows: DataFrame, settings: JoinSettings, partitions: dict[str, int]
) -> DataFrame:
    """Joined pairs keyed by their id, late records keyed as in the raw topic, both partitioned by
    thing, so a thing's results keep the join's order for the aggregates over them; with the
    statistics, their cycles and overload alerts as they were encoded."""
    from pyspark.sql import functions as F

    return outputs.to_kafka_records(
        rows,
        outputs.routes(settings, output_topics(settings), partitions, F.col("stage"), F.lit(None)),
        dlq_topic=settings.dlq_topic,
        dlq_partitions=partitions[settings.dlq_topic],
        source_topic=settings.raw_topic,
        stage=JOIN_STAGE,
    )


def build_join(settings: JoinSettings) -> Callable[[SparkSession], DataFrame]:
    """The job's query: raw measurements in, Kafka records (topic, key, value) out."""
    function = join_pass(settings)
    partitions = output_partitions(settings, output_topics(settings).values())

    def build(spark: SparkSession) -> DataFrame:
        measurements = read_measurements(spark, settings)
        relevant = measurements.where(
            input_quantities(measurements.quantity, settings) | measurements.thing.isNull()
        )
        rows = function.apply(relevant.select(*MEASUREMENT_COLUMNS).groupBy("thing"))
        return to_kafka_records(rows, settings, partitions)

    return build


def check(settings: JoinSettings) -> None:
    """Fail fast on a bad JOIN_PAIRS, OPSTATS_POWER or machine catalogue, before Spark starts."""
    join_plan(settings)
    operation_stats.stats_operator(settings)


JOB = StreamingJob(
    "spark_join", "spark_jobs.join", __doc__, JoinSettings, lambda _: "lsb-join", build_join, check
)
main = JOB.main


if __name__ == "__main__":
    sys.exit(main())
