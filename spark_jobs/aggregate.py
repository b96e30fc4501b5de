"""python -m spark_jobs.aggregate: event-time window aggregates per (thing, quantity), exactly once.

Reads the raw topic (read_committed), keeps tumbling (default 10 s) and optional sliding
windows per (thing, quantity) with count, mean, min, max and sample stddev, and emits each
window once, final, when the watermark (max event time seen - WATERMARK_DELAY) passes its end.
Records behind the watermark go to the late topic with reason ``behind_watermark``. Output is
Avro (schemas/aggregate.avsc, schemas/late.avsc) with deterministic keys, partitioned by thing,
written through the exactly-once transactional sink. Exact lateness and emission rules:
spark_jobs/windows.py. SIGTERM stops after the current batch (exit 0).
"""
from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from streamkit.avro_codec import schema_text
from streamkit.config import setting
from streamkit.durations import parse_duration_ms
from streamkit.logs import setup_logging

from spark_jobs.config import SparkJobSettings
from spark_jobs.runner import read_kafka, read_measurements, run_query, topic_partitions
from spark_jobs.session import ROCKSDB_STATE_STORE
from spark_jobs.windows import OUTPUT_SCHEMA_DDL, STAGE, WindowSpec, make_processor, parse_windows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger("spark_jobs.aggregate")
SERVICE = "spark_aggregate"
DEFAULT_QUERY = "aggregate"

#: Columns every measurement source must provide (the raw topic's decoded form).
MEASUREMENT_COLUMNS = ("thing", "quantity", "event_time_ms", "value", "row_id", "event_time")


@dataclass(frozen=True)
class AggregateSettings(SparkJobSettings):
    tumbling: str = setting("10s", "AGGREGATE_TUMBLING", "tumbling window sizes, comma separated ('off': none)")
    sliding: str = setting("", "AGGREGATE_SLIDING",
                           "sliding windows as SIZE/SLIDE, comma separated, e.g. 60s/10s (default: none)")
    watermark_delay: str = setting("10s", "AGGREGATE_WATERMARK_DELAY",
                                   "how far behind the max event time a record may arrive and still count")
    source: str = setting("raw", "AGGREGATE_SOURCE",
                          "raw: each measured quantity of the raw topic; joined: each join result of the joined "
                          "topic (e.g. mechanical_power) as a quantity. One job per source: each keeps its own "
                          "watermark, so the join's lag never makes its results late against raw event time")
    available_now: bool = setting(False, "AGGREGATE_AVAILABLE_NOW",
                                  "process what is in the topic now, emit, and exit 0 (backfills)")

    def window_specs(self) -> list[WindowSpec]:
        return parse_windows(self.tumbling, self.sliding)

    @property
    def default_query(self) -> str:
        return DEFAULT_QUERY if self.source == "raw" else f"{DEFAULT_QUERY}-{self.source}"


def read_join_results(spark: "SparkSession", settings: AggregateSettings) -> "DataFrame":
    """The joined topic as measurements: quantity = the pair's result name, value = its result,
    event time = the pair's (the later input's), row_id = the pair's id."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    pairs = read_kafka(spark, settings, settings.joined_topic).select(
        from_avro("value", schema_text("joined")).alias("p")).select("p.*")
    return pairs.select("thing", F.col("result_name").alias("quantity"), "event_time_ms",
                        F.col("result").alias("value"), F.col("id").alias("row_id"),
                        F.timestamp_millis("event_time_ms").alias("event_time"))


def measurement_sources(spark: "SparkSession", settings: AggregateSettings) -> list["DataFrame"]:
    """The inputs, each with MEASUREMENT_COLUMNS."""
    if settings.source == "joined":
        return [read_join_results(spark, settings)]
    return [read_measurements(spark, settings)]


def window_records(measurements: "DataFrame", specs: list[WindowSpec], watermark_delay_ms: int) -> "DataFrame":
    """Aggregates and late records (OUTPUT_SCHEMA_DDL rows) from a measurement stream."""
    watermarked = measurements.withWatermark("event_time", f"{watermark_delay_ms} milliseconds")
    # Without the watermark column in its input the operator does not pre-filter late rows:
    # they reach the processor, which sends them to the late topic (see spark_jobs/windows.py).
    return (watermarked.select("thing", "quantity", "event_time_ms", "value", "row_id")
            .groupBy("thing", "quantity")
            .transformWithStateInPandas(make_processor(specs), OUTPUT_SCHEMA_DDL, "Append", "EventTime"))


def to_kafka_records(records: "DataFrame", settings: AggregateSettings, partitions: dict[str, int]) -> "DataFrame":
    """Avro values, deterministic keys, partition by thing (crc32, as the bridge does)."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import to_avro

    is_aggregate = F.col("record_type") == "aggregate"
    aggregate_value = to_avro(F.struct(
        "thing", "quantity", "window_kind", "window_size_ms", "window_slide_ms", "window_start_ms", "window_end_ms",
        "count", "mean", "min", "max", "stddev"), schema_text("aggregate"))
    late_value = to_avro(F.struct("thing", "quantity", "event_time_ms", "value", "row_id", "reason",
                                  F.lit(STAGE).alias("stage"), "watermark_ms"), schema_text("late"))
    aggregate_key = F.concat_ws("|", "thing", "quantity", "window_label", F.col("window_start_ms").cast("string"))
    late_key = F.concat_ws("|", "thing", "quantity", F.col("event_time_ms").cast("string"))
    thing_hash = F.crc32(F.encode("thing", "UTF-8"))
    return records.select(
        F.when(is_aggregate, F.lit(settings.aggregates_topic)).otherwise(F.lit(settings.late_topic)).alias("topic"),
        F.when(is_aggregate, aggregate_key).otherwise(late_key).cast("binary").alias("key"),
        F.when(is_aggregate, aggregate_value).otherwise(late_value).alias("value"),
        F.when(is_aggregate, F.pmod(thing_hash, F.lit(partitions[settings.aggregates_topic])))
        .otherwise(F.pmod(thing_hash, F.lit(partitions[settings.late_topic]))).cast("int").alias("partition"))


def build(settings: AggregateSettings) -> Callable[["SparkSession"], "DataFrame"]:
    specs = settings.window_specs()
    delay_ms = parse_duration_ms(settings.watermark_delay)
    partitions = {topic: topic_partitions(settings, topic) for topic in (settings.aggregates_topic, settings.late_topic)}

    def output(spark: "SparkSession") -> "DataFrame":
        sources = measurement_sources(spark, settings)
        measurements = sources[0].select(*MEASUREMENT_COLUMNS)
        for other in sources[1:]:
            measurements = measurements.unionByName(other.select(*MEASUREMENT_COLUMNS))
        log.info("aggregate query", extra={"windows": [s.label for s in specs], "watermark_delay_ms": delay_ms,
                                           "partitions": partitions})
        return to_kafka_records(window_records(measurements, specs, delay_ms), settings, partitions)

    return output


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spark_jobs.aggregate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    settings, _ = AggregateSettings.parse(argv, parser=parser)
    setup_logging(settings.log_level, service=SERVICE)
    if settings.source not in ("raw", "joined"):
        parser.error(f"--source must be raw or joined, not {settings.source!r}")
    try:
        output = build(settings)
    except ValueError as exc:
        parser.error(str(exc))
    return run_query(SERVICE, settings, settings.default_query, output, available_now=settings.available_now,
                     session_conf=ROCKSDB_STATE_STORE)


if __name__ == "__main__":
    sys.exit(main())
