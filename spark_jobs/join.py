"""python -m spark_jobs.join: the LocalStreamBuffer join as a Spark Structured Streaming job.

Raw measurements (read_committed) are grouped by thing; each group of a micro-batch goes, in
Kafka offset order, through the join operator inside ``applyInPandasWithState``, with its
state snapshot as one binary value per thing in the RocksDB state store. Joined
pairs go to the joined topic, records the library hands back (late, partner timeout) to the
late topic, Avro-encoded by Spark (``to_avro``, in the JVM) and written exactly once by the
runner's transactional sink.

The join is ``lsb.JoinOperator`` run by the one Spark adapter (``spark_jobs.stateful``).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from lsb import JoinOperator, JoinStep, PairSpec
from lsb.plan import JoinPlan, PatternPair
from lsb.results import RESULT_FUNCTIONS, ResultFn
from operators import Pattern, Records, is_pattern
from operators.reasons import FUTURE_TIMESTAMP
from spark_jobs import dead_letters, outputs
from spark_jobs.config import JoinSettings
from spark_jobs.job import StreamingJob
from spark_jobs.output_columns import OutputRows
from spark_jobs.stateful import MEASUREMENT_COLUMNS, OperatorFunction
from streamkit.errors import ConfigError
from streamkit.wire.registry import header as registry_header

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession


def result_function(name: str, variable: str) -> ResultFn:
    """A result function by its name, or a configuration error naming ``variable``."""
    if name not in RESULT_FUNCTIONS:
        known = ", ".join(sorted(RESULT_FUNCTIONS))
        raise ConfigError(variable, f"unknown result function {name!r} (known: {known})")
    return RESULT_FUNCTIONS[name]


def parse_pairs(text: str) -> tuple[tuple[PairSpec, ...], tuple[PatternPair, ...]]:
    """JOIN_PAIRS: ``left:right[:result]`` items, comma separated; an item whose names hold a
    ``*`` each is a pattern pair, joined once per component (docs/join.md)."""
    specs, patterns = [], []
    for item in filter(None, (part.strip() for part in text.split(","))):
        parts = item.split(":")
        if len(parts) not in (2, 3):
            raise ConfigError("JOIN_PAIRS", f"{item!r} is not left:right[:result]")
        left, right, *rest = parts
        result = rest[0] if rest else "mechanical_power"
        function = result_function(result, "JOIN_PAIRS")
        try:
            if is_pattern(left) or is_pattern(right):
                patterns.append(PatternPair(Pattern(left), Pattern(right), function, result))
            else:
                specs.append(PairSpec(left, right, function, result))
        except ValueError as exc:
            raise ConfigError("JOIN_PAIRS", f"{item!r}: {exc}") from None
    if not specs and not patterns:
        raise ConfigError("JOIN_PAIRS", "names no pair (left:right[:result], comma separated)")
    return tuple(specs), tuple(patterns)


def join_plan(settings: JoinSettings) -> JoinPlan:
    """JOIN_* as the join's plan; a bad JOIN_PAIRS is a configuration error naming it."""
    pairs, patterns = parse_pairs(settings.pairs)
    try:
        return JoinPlan(
            pairs,
            patterns,
            max_gap_ms=settings.max_gap_ms or None,
            allowed_disorder_ms=settings.allowed_disorder_ms,
            partner_timeout_ms=settings.partner_timeout_ms or None,
        )
    except ValueError as exc:
        raise ConfigError("JOIN_PAIRS", str(exc)) from None


def joined_quantities(quantity: Column, plan: JoinPlan) -> Column:
    """Whether a record's quantity is one the plan joins, as a Spark condition."""
    from pyspark.sql import functions as F

    wanted = quantity.isin(list(plan.config(()).quantities))
    for pattern in plan.quantity_patterns:
        wanted = wanted | (
            quantity.startswith(pattern.prefix)
            & quantity.endswith(pattern.suffix)
            & (F.length(quantity) > len(pattern.prefix) + len(pattern.suffix))
        )
    return wanted


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
    ("component", "string"),
    ("quantity", "string"),
    ("value", "double"),
    ("row_id", "string"),
    ("reason", "string"),
    *dead_letters.OUTPUT_FIELDS,
]
OUTPUT_SCHEMA = ", ".join(f"{name} {kind}" for name, kind in OUTPUT_FIELDS)
STAGE = "join"  #: the late records' stage


class JoinRows:
    """Renders what the join operator emitted for a thing as output rows: records set aside for
    a future timestamp, joined pairs, late records (each kind's other columns are filler:
    ``to_kafka_records`` reads only its own kind's). Names come from the config each step is
    of (a thing's pairs grow with its components). Picklable."""

    def __call__(
        self, out: OutputRows, key: tuple, batch: Records, step: JoinStep, tags: dict[str, Any]
    ) -> None:
        import numpy as np

        thing = key[0]
        ahead = step.ahead
        if len(ahead):  # a bad clock moves no stream's clock (docs/windows.md)
            out.add(
                len(ahead),
                record_type="late",
                thing=thing,
                reason=FUTURE_TIMESTAMP,
                quantity=ahead.quantity,
                row_id=ahead.row_id,
                event_time_ms=ahead.event_time_ms,
                value=ahead.value,
                **tags,
            )
        pairs, late = step.result.pairs, step.result.late
        if len(pairs):
            columns = pairs.to_columns(thing, step.config)
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
                result_name=columns["result_name"],
                component=columns["component"],
                **tags,
            )
        if len(late):
            columns = late.to_columns(thing, step.config)
            index = late.index
            row_id = np.full(len(late), "", dtype=object)  # -1: a record of an earlier batch
            mine = index >= 0
            row_id[mine] = step.joined.row_id[index[mine]]
            out.add(
                len(late),
                record_type="late",
                thing=thing,
                quantity=columns["quantity"],
                event_time_ms=columns["time"],
                value=columns["value"],
                reason=columns["reason"],
                row_id=row_id,
                **tags,
            )


def join_function(
    plan: JoinPlan, max_future_ms: int | None = None, idle_ms: int = 0
) -> OperatorFunction:
    """The per-thing function Spark calls with the thing's rows of one micro-batch, or without
    rows when its idle flush is due."""
    return OperatorFunction(
        JoinOperator(plan, max_future_ms, idle_ms), JoinRows(), OUTPUT_FIELDS, timers=bool(idle_ms)
    )


def to_kafka_records(
    rows: DataFrame, settings: JoinSettings, partitions: dict[str, int]
) -> DataFrame:
    """Joined pairs keyed by their id, late records keyed as in the raw topic, both partitioned by
    thing, so a thing's results keep the join's order for the aggregates over them."""
    from pyspark.sql import functions as F

    routes = [
        outputs.joined_route(
            settings.joined_topic,
            partitions[settings.joined_topic],
            registry_header(settings, settings.joined_topic, "joined"),
        ),
        outputs.late_route(
            settings.late_topic,
            partitions[settings.late_topic],
            F.lit(STAGE),
            F.lit(None),
            header=registry_header(settings, settings.late_topic, "late"),
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
    from spark_jobs.runner import read_measurements, topic_partitions

    plan = join_plan(settings)
    function = join_function(plan, settings.max_future_ms(), settings.idle_timeout_ms())
    partitions = {
        topic: topic_partitions(settings, topic)
        for topic in (settings.joined_topic, settings.late_topic, settings.dlq_topic)
    }

    def build(spark: SparkSession) -> DataFrame:
        measurements = read_measurements(spark, settings)
        relevant = measurements.where(
            joined_quantities(measurements.quantity, plan) | measurements.thing.isNull()
        )
        rows = function.apply(relevant.select(*MEASUREMENT_COLUMNS).groupBy("thing"))
        return to_kafka_records(rows, settings, partitions)

    return build


def check(settings: JoinSettings) -> None:
    """Fail fast on a bad JOIN_PAIRS, before Spark starts."""
    join_plan(settings)


JOB = StreamingJob(
    "spark_join", "spark_jobs.join", __doc__, JoinSettings, lambda _: "lsb-join", build_join, check
)
main = JOB.main


if __name__ == "__main__":
    sys.exit(main())
