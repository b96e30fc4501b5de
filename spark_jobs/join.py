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

from lsb import JoinConfig, PairSpec, process_batch
from lsb.results import RESULT_FUNCTIONS
from spark_jobs import dead_letters, outputs
from spark_jobs.config import JoinSettings
from spark_jobs.job import StreamingJob
from spark_jobs.key_records import KeyRecords
from spark_jobs.output_columns import OutputRows
from streamkit.errors import ConfigError
from windowing import FUTURE_REASON

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession


def parse_pairs(text: str) -> tuple[PairSpec, ...]:
    specs = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        parts = item.split(":")
        if len(parts) not in (2, 3):
            raise ConfigError("JOIN_PAIRS", f"{item!r} is not left:right[:result]")
        left, right, *rest = parts
        result = rest[0] if rest else "mechanical_power"
        if result not in RESULT_FUNCTIONS:
            raise ConfigError(
                "JOIN_PAIRS",
                f"unknown result function {result!r} (known: {', '.join(sorted(RESULT_FUNCTIONS))})",
            )
        specs.append(PairSpec(left, right, RESULT_FUNCTIONS[result], result))
    if not specs:
        raise ConfigError("JOIN_PAIRS", "names no pair (left:right[:result], comma separated)")
    return tuple(specs)


def join_config(settings: JoinSettings) -> JoinConfig:
    return JoinConfig(
        pairs=parse_pairs(settings.pairs),
        max_gap_ms=settings.max_gap_ms or None,
        allowed_disorder_ms=settings.allowed_disorder_ms,
        partner_timeout_ms=settings.partner_timeout_ms or None,
    )


#: What the state function hands back: one row per joined pair or late record, as plain
#: columns. Avro encoding and keys are Spark expressions (``to_kafka_records``): encoding in the
#: Python worker was most of the worker's time (the figure: README, Spark join).
OUTPUT_FIELDS: list[tuple[str, str]] = [
    ("record_type", "string"),
    ("id", "string"),
    ("thing", "string"),
    ("left_quantity", "string"),
    ("right_quantity", "string"),
    ("left_time_ms", "long"),
    ("right_time_ms", "long"),
    ("left_value", "double"),
    ("right_value", "double"),
    ("result_name", "string"),
    ("result", "double"),
    ("event_time_ms", "long"),
    ("quantity", "string"),
    ("value", "double"),
    ("row_id", "string"),
    ("reason", "string"),
    *dead_letters.OUTPUT_FIELDS,
]
OUTPUT_SCHEMA = ", ".join(f"{name} {kind}" for name, kind in OUTPUT_FIELDS)
STATE_SCHEMA = "lsb binary"
STAGE = "join"  #: the late records' stage


class GroupJoiner:
    """The per-thing function Spark calls with the thing's rows of one micro-batch. Picklable."""

    def __init__(self, config: JoinConfig, max_future_ms: int | None = None) -> None:
        self.config = config
        self.max_future_ms = max_future_ms

    def __call__(
        self, key: tuple, frames: Iterator[pd.DataFrame], state: Any
    ) -> Iterator[pd.DataFrame]:
        thing = key[0]
        if thing is None:  # records that did not decode: handed back, no state
            yield dead_letters.rows(OUTPUT_FIELDS, frames)
            return
        out = OutputRows(OUTPUT_FIELDS)
        self.step(thing, KeyRecords.arrival_order(frames), state, out)
        yield out.frame()

    def step(
        self, thing: str, records: KeyRecords, state: Any, out: OutputRows, **tags: Any
    ) -> None:
        """The thing's records of a batch, in arrival order, through the join; its pairs and
        late records (with the ``tags`` columns) added to ``out``."""
        if self.max_future_ms is not None:  # a bad clock moves no stream's clock (docs/windows.md)
            future = records.event_time_ms > state.getCurrentProcessingTimeMs() + self.max_future_ms
            if future.any():
                ahead = records.take(future)
                out.add(
                    len(ahead),
                    record_type="late",
                    thing=thing,
                    reason=FUTURE_REASON,
                    quantity=ahead.quantity,
                    row_id=ahead.row_id,
                    event_time_ms=ahead.event_time_ms,
                    value=ahead.value,
                    **tags,
                )
                records = records.take(~future)
        previous = state.get[0] if state.exists else None
        result = process_batch(
            self.config, previous, records.quantity, records.event_time_ms, records.value
        )
        state.update((result.state_bytes(self.config),))
        self.add_rows(out, thing, result, records.row_id, tags)

    def add_rows(
        self, out: OutputRows, thing: str, result: Any, row_ids: np.ndarray, tags: dict
    ) -> None:
        """Joined pairs and late records (each kind's other columns are filler:
        ``to_kafka_records`` reads only its own kind's)."""
        import numpy as np

        pairs, late = result.pairs, result.late
        if len(pairs):
            columns = pairs.to_columns(thing, self.config)
            names = np.array([spec.result_name for spec in self.config.pairs], dtype=object)
            out.add(
                len(pairs),
                record_type="joined",
                thing=thing,
                id=columns["id"],
                left_quantity=columns["left_quantity"],
                right_quantity=columns["right_quantity"],
                left_time_ms=columns["left_time"],
                right_time_ms=columns["right_time"],
                left_value=columns["left_value"],
                right_value=columns["right_value"],
                result=columns["result"],
                event_time_ms=columns["event_time"],
                result_name=names[pairs.pair],
                **tags,
            )
        if len(late):
            columns = late.to_columns(thing, self.config)
            index = late.index
            out.add(
                len(late),
                record_type="late",
                thing=thing,
                quantity=columns["quantity"],
                event_time_ms=columns["time"],
                value=columns["value"],
                reason=columns["reason"],
                row_id=np.where(index >= 0, row_ids[np.maximum(index, 0)], ""),
                **tags,
            )


def to_kafka_records(
    rows: DataFrame, settings: JoinSettings, partitions: dict[str, int]
) -> DataFrame:
    """Joined pairs keyed by their id, late records keyed as in the raw topic, both partitioned by
    thing, so a thing's results keep the join's order for the aggregates over them."""
    from pyspark.sql import functions as F

    routes = [
        outputs.joined_route(settings.joined_topic, partitions[settings.joined_topic]),
        outputs.late_route(
            settings.late_topic, partitions[settings.late_topic], F.lit(STAGE), F.lit(None)
        ),
    ]
    return outputs.to_kafka_records(
        rows,
        routes,
        dlq_topic=settings.dlq_topic,
        dlq_partitions=partitions[settings.dlq_topic],
        source_topic=settings.raw_topic,
        stage=STAGE,
    )


def build_join(settings: JoinSettings):
    """The job's query: raw measurements in, Kafka records (topic, key, value) out."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    from spark_jobs.runner import read_measurements, topic_partitions

    joiner = GroupJoiner(join_config(settings), settings.max_future_ms())
    wanted = list(joiner.config.quantities)
    partitions = {
        topic: topic_partitions(settings, topic)
        for topic in (settings.joined_topic, settings.late_topic, settings.dlq_topic)
    }

    def build(spark: SparkSession) -> DataFrame:
        measurements = read_measurements(spark, settings)
        relevant = measurements.where(
            measurements.quantity.isin(wanted) | measurements.thing.isNull()
        )
        rows = (
            relevant.select(
                "thing",
                "quantity",
                "event_time_ms",
                "value",
                "row_id",
                "kafka_partition",
                "kafka_offset",
                *dead_letters.INPUT_COLUMNS,
            )
            .groupBy("thing")
            .applyInPandasWithState(
                joiner, OUTPUT_SCHEMA, STATE_SCHEMA, "append", GroupStateTimeout.NoTimeout
            )
        )
        return to_kafka_records(rows, settings, partitions)

    return build


def check(settings: JoinSettings) -> None:
    """Fail fast on a bad JOIN_PAIRS, before Spark starts."""
    join_config(settings)


JOB = StreamingJob(
    "spark_join", "spark_jobs.join", __doc__, JoinSettings, lambda _: "lsb-join", build_join, check
)
main = JOB.main


if __name__ == "__main__":
    sys.exit(main())
