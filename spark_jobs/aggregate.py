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
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from streamkit.wire import aggregate_key_column, record_key_column, schema_text, thing_partition_column

from spark_jobs import dead_letters
from spark_jobs.config import AggregateSettings
from spark_jobs.job import StreamingJob
from spark_jobs.output_columns import typed_columns
from spark_jobs.runner import observe_event_time, read_kafka, read_measurements, topic_partitions
from windowing import (NO_TIME, STAGE, SUPERSEDED_REASON, KeyState, Step, WindowRules, flush, process)

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger("spark_jobs.aggregate")
SERVICE = "spark_aggregate"

#: Columns every measurement source must provide: the raw topic's decoded form and its arrival
#: order (a key's records are processed in Kafka offset order).
MEASUREMENT_COLUMNS = ("thing", "quantity", "event_time_ms", "value", "row_id", "kafka_partition", "kafka_offset",
                       *dead_letters.INPUT_COLUMNS)


def read_join_results(spark: "SparkSession", settings: AggregateSettings) -> "DataFrame":
    """The joined topic as measurements: quantity = the pair's result name, value = its result,
    event time = the pair's (the later input's), row_id = the pair's id."""
    from pyspark.sql import functions as F

    pairs = dead_letters.decode(read_kafka(spark, settings, settings.joined_topic), schema_text("joined"))
    return observe_event_time(pairs.select(
        F.col("d.thing").alias("thing"), F.col("d.result_name").alias("quantity"), "d.event_time_ms",
        F.col("d.result").alias("value"), F.col("d.id").alias("row_id"), "kafka_partition", "kafka_offset",
        *dead_letters.INPUT_COLUMNS))


def measurements(spark: "SparkSession", settings: AggregateSettings) -> "DataFrame":
    """The input, with MEASUREMENT_COLUMNS."""
    if settings.source == "joined":
        return read_join_results(spark, settings)
    return read_measurements(spark, settings).select(*MEASUREMENT_COLUMNS)


#: What the state function hands back: aggregates and late records as plain columns (Avro and
#: keys are Spark expressions in ``to_kafka_records``).
OUTPUT_FIELDS: list[tuple[str, str]] = [
    ("record_type", "string"), ("thing", "string"), ("quantity", "string"),
    ("window_kind", "string"), ("window_size_ms", "long"), ("window_slide_ms", "long"), ("window_label", "string"),
    ("window_start_ms", "long"), ("window_end_ms", "long"),
    ("count", "long"), ("mean", "double"), ("min", "double"), ("max", "double"), ("stddev", "double"),
    ("event_time_ms", "long"), ("value", "double"), ("row_id", "string"), ("reason", "string"), ("watermark_ms", "long"),
    *dead_letters.OUTPUT_FIELDS,
]
OUTPUT_SCHEMA = ", ".join(f"{name} {kind}" for name, kind in OUTPUT_FIELDS)
#: KeyState.to_row() and the processing time of the key's last batch with data
STATE_SCHEMA = "clock_ms long, horizon_ms long, times binary, vals binary, row_ids string, last_batch_ms long"


class WindowFunction:
    """The per-(thing, quantity) function of ``applyInPandasWithState``. Picklable.

    Rows come in the key's Kafka arrival order (a thing lives in one partition); the library
    decides everything else. The idle timeout is Spark's processing-time timeout: it fires in a
    batch without data for the key. A timer that fires more than an idle period late means the
    query itself was not running (a stop, a crash): the key had no chance to speak, so the timer
    is armed again instead of closing its windows.
    """

    def __init__(self, rules: WindowRules, idle_timeout_ms: int) -> None:
        self.rules = rules
        self.idle_timeout_ms = idle_timeout_ms

    def __call__(self, key: tuple, frames: Iterator["pd.DataFrame"], state: Any) -> Iterator["pd.DataFrame"]:
        import pandas as pd

        thing, quantity = key
        if thing is None:  # records that did not decode: handed back, no state, no timer
            yield dead_letters.rows(OUTPUT_FIELDS, pd.concat(list(frames), ignore_index=True))
            return
        now = int(state.getCurrentProcessingTimeMs())
        if state.hasTimedOut:
            current, last_batch = KeyState.from_row(state.get[:5]), int(state.get[5])
            if now - last_batch > 2 * self.idle_timeout_ms:
                state.update((*current.to_row(), now))
                state.setTimeoutDuration(self.idle_timeout_ms)
                return
            step = flush(self.rules, current)
            state.update((*step.state.to_row(), now))
            yield self.rows(thing, quantity, step, None)
            return
        batch = pd.concat(list(frames), ignore_index=True).sort_values(["kafka_partition", "kafka_offset"],
                                                                       kind="stable", ignore_index=True)
        current = KeyState.from_row(state.get[:5]) if state.exists else KeyState()
        step = process(self.rules, current, batch["event_time_ms"].to_numpy(), batch["value"].to_numpy(),
                       batch["row_id"].tolist(), now)
        state.update((*step.state.to_row(), now))
        if self.idle_timeout_ms and step.state.has_open_windows:
            state.setTimeoutDuration(self.idle_timeout_ms)
        yield self.rows(thing, quantity, step, batch)

    @staticmethod
    def rows(thing: str, quantity: str, step: Step, batch: "pd.DataFrame | None") -> "pd.DataFrame":
        """Windows, then set-aside records, then superseded copies, in OUTPUT_FIELDS (each kind's
        other columns are filler)."""
        import numpy as np
        import pandas as pd

        windows, aside, superseded = step.windows, step.aside, step.superseded
        n_w, n_a = len(windows), len(windows) + len(aside)
        n = n_a + len(superseded)
        columns = typed_columns(OUTPUT_FIELDS, n)
        columns["record_type"][:n_w], columns["record_type"][n_w:] = "aggregate", "late"
        columns["thing"][:], columns["quantity"][:] = thing, quantity
        for i, w in enumerate(windows):
            columns["window_kind"][i], columns["window_label"][i] = w.spec.kind, w.spec.label
            columns["window_size_ms"][i], columns["window_slide_ms"][i] = w.spec.size_ms, w.spec.slide_ms
            columns["window_start_ms"][i], columns["window_end_ms"][i], columns["count"][i] = w.start_ms, w.end_ms, w.count
            columns["mean"][i], columns["min"][i], columns["max"][i] = w.mean, w.min, w.max
            columns["stddev"][i] = np.nan if w.stddev is None else w.stddev  # NaN reaches Spark as null
        horizons = [None if a.horizon_ms == NO_TIME else a.horizon_ms for a in aside]
        if aside:
            at = np.array([a.index for a in aside], dtype=np.int64)
            columns["event_time_ms"][n_w:n_a] = batch["event_time_ms"].to_numpy()[at]
            columns["value"][n_w:n_a] = batch["value"].to_numpy()[at]
            columns["row_id"][n_w:n_a] = batch["row_id"].to_numpy()[at]
            columns["reason"][n_w:n_a] = [a.reason for a in aside]
        for i, s in enumerate(superseded, n_a):
            columns["event_time_ms"][i], columns["value"][i], columns["row_id"][i] = s.time_ms, s.value, s.row_id
            columns["reason"][i] = SUPERSEDED_REASON
        horizons += [None if s.horizon_ms == NO_TIME else s.horizon_ms for s in superseded]
        return pd.DataFrame({**columns, "watermark_ms": pd.array([None] * n_w + horizons, dtype="Int64")})


def window_records(measured: "DataFrame", rules: WindowRules, idle_timeout_ms: int) -> "DataFrame":
    """Aggregates and late records (OUTPUT_SCHEMA rows) from a measurement stream."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    timeout = GroupStateTimeout.ProcessingTimeTimeout if idle_timeout_ms else GroupStateTimeout.NoTimeout
    return (measured.groupBy("thing", "quantity")
            .applyInPandasWithState(WindowFunction(rules, idle_timeout_ms), OUTPUT_SCHEMA, STATE_SCHEMA, "append",
                                    timeout))


def to_kafka_records(records: "DataFrame", settings: AggregateSettings, partitions: dict[str, int]) -> "DataFrame":
    """Avro values, deterministic keys, partition by thing (streamkit.wire.keys, as the bridge)."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import to_avro

    is_aggregate = F.col("record_type") == "aggregate"
    aggregate_value = to_avro(F.struct(
        "thing", "quantity", "window_kind", "window_size_ms", "window_slide_ms", "window_start_ms", "window_end_ms",
        "count", "mean", "min", "max", "stddev"), schema_text("aggregate"))
    late_value = to_avro(F.struct("thing", "quantity", "event_time_ms", "value", "row_id", "reason",
                                  F.lit(STAGE).alias("stage"), "watermark_ms"), schema_text("late"))
    return records.select(*dead_letters.route({
        "topic": F.when(is_aggregate, F.lit(settings.aggregates_topic)).otherwise(F.lit(settings.late_topic)),
        "key": F.when(is_aggregate, aggregate_key_column()).otherwise(record_key_column()).cast("binary"),
        "value": F.when(is_aggregate, aggregate_value).otherwise(late_value),
        "partition": F.when(is_aggregate, thing_partition_column(partitions[settings.aggregates_topic]))
        .otherwise(thing_partition_column(partitions[settings.late_topic])).cast("int"),
    }, dlq_topic=settings.dlq_topic, dlq_partitions=partitions[settings.dlq_topic],
        source_topic=settings.joined_topic if settings.source == "joined" else settings.raw_topic, stage=STAGE))


def build(settings: AggregateSettings) -> Callable[["SparkSession"], "DataFrame"]:
    rules, idle_ms = settings.window_rules(), settings.idle_timeout_ms()
    partitions = {topic: topic_partitions(settings, topic)
                  for topic in (settings.aggregates_topic, settings.late_topic, settings.dlq_topic)}

    def output(spark: "SparkSession") -> "DataFrame":
        log.info("aggregate query", extra={"windows": [s.label for s in rules.specs],
                                           "allowed_lateness_ms": rules.allowed_lateness_ms,
                                           "idle_timeout_ms": idle_ms, "max_future_ms": rules.max_future_ms,
                                           "partitions": partitions})
        return to_kafka_records(window_records(measurements(spark, settings), rules, idle_ms), settings, partitions)

    return output


def check(settings: AggregateSettings) -> None:
    """Fail at start-up, before Spark, on a bad source or window rule (ValueError: a usage error)."""
    if settings.source not in ("raw", "joined"):
        raise ValueError(f"--source must be raw or joined, not {settings.source!r}")
    settings.window_rules()
    settings.idle_timeout_ms()


JOB = StreamingJob(SERVICE, "spark_jobs.aggregate", __doc__, AggregateSettings, lambda s: s.default_query, build, check)
main = JOB.main


if __name__ == "__main__":
    sys.exit(main())
