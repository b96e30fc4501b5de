"""python -m spark_jobs.join: the LocalStreamBuffer join as a Spark Structured Streaming job.

Raw measurements (read_committed) are grouped by thing; each group of a micro-batch goes, in
Kafka offset order, through the library's batch path inside ``applyInPandasWithState``, with
the library's compact state as one binary value per thing in the RocksDB state store. Joined
pairs go to the joined topic, records the library hands back (late, partner timeout) to the
late topic, Avro-encoded by Spark (``to_avro``, in the JVM) and written exactly once by the
runner's transactional sink.

Why applyInPandasWithState rather than transformWithStateInPandas: measured with this job's own
state function (benchmarks/bench_state_api.py; figures in the README, "Why applyInPandasWithState")
it is faster at the batch sizes live traffic produces and warms up sooner after a start, slower
only at the largest catch-up batches; the library keeps its own compact state (one binary value
per thing), so the richer state API buys nothing here.
"""
from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from spark_jobs import dead_letters
from spark_jobs.config import JoinSettings
from spark_jobs.job import StreamingJob
from lsb import JoinConfig, PairSpec, process_batch
from lsb.results import RESULT_FUNCTIONS
from spark_jobs.output_columns import typed_columns
from windowing import FUTURE_REASON


if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession


def parse_pairs(text: str) -> tuple[PairSpec, ...]:
    specs = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        left, right, *rest = item.split(":")
        result = rest[0] if rest else "mechanical_power"
        if result not in RESULT_FUNCTIONS:
            raise SystemExit(f"unknown result function {result!r} in JOIN_PAIRS (known: {sorted(RESULT_FUNCTIONS)})")
        specs.append(PairSpec(left, right, RESULT_FUNCTIONS[result], result))
    if not specs:
        raise SystemExit("JOIN_PAIRS names no pair")
    return tuple(specs)


def join_config(settings: JoinSettings) -> JoinConfig:
    return JoinConfig(pairs=parse_pairs(settings.pairs), max_gap_ms=settings.max_gap_ms or None,
                      allowed_disorder_ms=settings.allowed_disorder_ms,
                      partner_timeout_ms=settings.partner_timeout_ms or None)


#: What the state function hands back: one row per joined pair or late record, as plain
#: columns. Avro encoding and keys are Spark expressions (``to_kafka_records``): encoding in the
#: Python worker was most of the worker's time (the figure: README, Spark join).
OUTPUT_FIELDS: list[tuple[str, str]] = [
    ("record_type", "string"), ("id", "string"), ("thing", "string"),
    ("left_quantity", "string"), ("right_quantity", "string"), ("left_time_ms", "long"), ("right_time_ms", "long"),
    ("left_value", "double"), ("right_value", "double"), ("result_name", "string"), ("result", "double"),
    ("event_time_ms", "long"), ("quantity", "string"), ("value", "double"), ("row_id", "string"), ("reason", "string"),
    *dead_letters.OUTPUT_FIELDS,
]
OUTPUT_SCHEMA = ", ".join(f"{name} {kind}" for name, kind in OUTPUT_FIELDS)
STATE_SCHEMA = "lsb binary"


class GroupJoiner:
    """The per-thing function Spark calls with the thing's rows of one micro-batch. Picklable."""

    def __init__(self, config: JoinConfig, max_future_ms: int | None = None) -> None:
        self.config = config
        self.max_future_ms = max_future_ms

    def __call__(self, key: tuple, frames: Iterator["pd.DataFrame"], state: Any) -> Iterator["pd.DataFrame"]:
        import pandas as pd

        thing = key[0]
        batch = pd.concat(list(frames), ignore_index=True)
        if thing is None:  # records that did not decode: handed back, no state
            yield dead_letters.rows(OUTPUT_FIELDS, batch)
            return
        # Arrival order: a thing lives in one Kafka partition, so its offsets order its records.
        batch = batch.sort_values("kafka_offset", kind="stable")
        if self.max_future_ms is not None:  # a bad clock moves no stream's clock (docs/windows.md)
            future = batch["event_time_ms"].to_numpy() > state.getCurrentProcessingTimeMs() + self.max_future_ms
            if future.any():
                yield self.future_rows(thing, batch[future])
                batch = batch[~future]
        previous = state.get[0] if state.exists else None
        result = process_batch(self.config, previous, batch["quantity"].to_numpy(),
                               batch["event_time_ms"].to_numpy(), batch["value"].to_numpy())
        state.update((result.state_bytes(self.config),))
        yield self.rows(thing, result, batch["row_id"].to_numpy())

    @staticmethod
    def future_rows(thing: str, records: "pd.DataFrame") -> "pd.DataFrame":
        """Records stamped too far ahead of the processing time, as late rows."""
        import pandas as pd

        frame = typed_columns(OUTPUT_FIELDS, len(records))
        frame["record_type"][:], frame["thing"][:], frame["reason"][:] = "late", thing, FUTURE_REASON
        frame["quantity"][:], frame["row_id"][:] = records["quantity"].to_numpy(), records["row_id"].to_numpy()
        frame["event_time_ms"][:], frame["value"][:] = records["event_time_ms"].to_numpy(), records["value"].to_numpy()
        return pd.DataFrame(frame)

    def rows(self, thing: str, result: Any, row_ids: "np.ndarray") -> "pd.DataFrame":
        """Joined pairs then late records, in OUTPUT_FIELDS (the other kind's columns are
        filler: ``to_kafka_records`` reads only its own kind's)."""
        import numpy as np
        import pandas as pd

        pairs, late = result.pairs, result.late
        n_pairs, n_late = len(pairs), len(late)
        frame = typed_columns(OUTPUT_FIELDS, n_pairs + n_late)
        frame["record_type"][:n_pairs], frame["record_type"][n_pairs:], frame["thing"][:] = "joined", "late", thing
        if n_pairs:
            columns = pairs.to_columns(thing, self.config)
            names = np.array([spec.result_name for spec in self.config.pairs], dtype=object)
            for target, source in (("id", "id"), ("left_quantity", "left_quantity"),
                                   ("right_quantity", "right_quantity"), ("left_time_ms", "left_time"),
                                   ("right_time_ms", "right_time"), ("left_value", "left_value"),
                                   ("right_value", "right_value"), ("result", "result"),
                                   ("event_time_ms", "event_time")):
                frame[target][:n_pairs] = columns[source]
            frame["result_name"][:n_pairs] = names[pairs.pair]
        if n_late:
            columns = late.to_columns(thing, self.config)
            frame["quantity"][n_pairs:] = columns["quantity"]
            frame["event_time_ms"][n_pairs:] = columns["time"]
            frame["value"][n_pairs:] = columns["value"]
            frame["reason"][n_pairs:] = columns["reason"]
            index = late.index
            frame["row_id"][n_pairs:] = np.where(index >= 0, row_ids[np.maximum(index, 0)], "")
        return pd.DataFrame(frame)


def to_kafka_records(rows: "DataFrame", settings: JoinSettings, partitions: dict[str, int]) -> "DataFrame":
    """Avro values and deterministic keys: pair id for joined pairs, thing|quantity|time for
    late records (as in the raw topic); partition crc32(thing), so a thing's results keep the
    join's order for the aggregates over them."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import to_avro

    from streamkit.wire import record_key_column, schema_text, thing_partition_column

    is_joined = F.col("record_type") == "joined"
    joined_value = to_avro(F.struct("id", "thing", "left_quantity", "right_quantity", "left_time_ms", "right_time_ms",
                                    "left_value", "right_value", "result_name", "result", "event_time_ms"),
                           schema_text("joined"))
    late_value = to_avro(F.struct("thing", "quantity", "event_time_ms", "value", "row_id", "reason",
                                  F.lit("join").alias("stage"), F.lit(None).cast("long").alias("watermark_ms")),
                         schema_text("late"))
    return rows.select(*dead_letters.route({
        "topic": F.when(is_joined, F.lit(settings.joined_topic)).otherwise(F.lit(settings.late_topic)),
        "key": F.when(is_joined, F.col("id")).otherwise(record_key_column()).cast("binary"),
        "value": F.when(is_joined, joined_value).otherwise(late_value),
        "partition": F.when(is_joined, thing_partition_column(partitions[settings.joined_topic]))
        .otherwise(thing_partition_column(partitions[settings.late_topic])).cast("int"),
    }, dlq_topic=settings.dlq_topic, dlq_partitions=partitions[settings.dlq_topic], source_topic=settings.raw_topic,
        stage="join"))


def build_join(settings: JoinSettings):
    """The job's query: raw measurements in, Kafka records (topic, key, value) out."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    from spark_jobs.runner import read_measurements, topic_partitions

    joiner = GroupJoiner(join_config(settings), settings.max_future_ms())
    wanted = list(joiner.config.quantities)
    partitions = {topic: topic_partitions(settings, topic)
                  for topic in (settings.joined_topic, settings.late_topic, settings.dlq_topic)}

    def build(spark: "SparkSession") -> "DataFrame":
        measurements = read_measurements(spark, settings)
        relevant = measurements.where(measurements.quantity.isin(wanted) | measurements.thing.isNull())
        rows = (relevant.select("thing", "quantity", "event_time_ms", "value", "row_id", "kafka_partition", "kafka_offset",
                                *dead_letters.INPUT_COLUMNS)
                .groupBy("thing")
                .applyInPandasWithState(joiner, OUTPUT_SCHEMA, STATE_SCHEMA, "append", GroupStateTimeout.NoTimeout))
        return to_kafka_records(rows, settings, partitions)

    return build


def check(settings: JoinSettings) -> None:
    """Fail fast on a bad JOIN_PAIRS, before Spark starts."""
    join_config(settings)


JOB = StreamingJob("spark_join", "spark_jobs.join", __doc__, JoinSettings, lambda _: "lsb-join", build_join, check)
main = JOB.main


if __name__ == "__main__":
    sys.exit(main())
