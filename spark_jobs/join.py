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
from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from lsb import JoinOperator, JoinStep, PairSpec
from lsb.plan import JoinPlan, PatternPair
from operators import Pattern, Records, Together, is_pattern
from operators.reasons import FUTURE_TIMESTAMP
from spark_jobs import dead_letters, operation_stats, outputs
from spark_jobs.config import JoinSettings, result_function
from spark_jobs.job import StreamingJob
from spark_jobs.output_columns import OutputRows
from spark_jobs.stateful import MEASUREMENT_COLUMNS, OperatorFunction, PartRows
from streamkit.errors import ConfigError
from streamkit.wire.registry import header as registry_header

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession


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
            max_gap=settings.max_gap or None,
            allowed_disorder=settings.allowed_disorder,
            partner_timeout=settings.partner_timeout or None,
        )
    except ValueError as exc:
        raise ConfigError("JOIN_PAIRS", str(exc)) from None


def wanted_quantities(
    quantity: Column, names: Sequence[str], patterns: Iterable[Pattern]
) -> Column:
    """Whether a record's quantity is one of ``names`` or matches one of ``patterns``, as a
    Spark condition (:meth:`operators.Pattern.component` in Spark's terms)."""
    from pyspark.sql import functions as F

    wanted = quantity.isin(list(names))
    for pattern in patterns:
        wanted = wanted | (
            quantity.startswith(pattern.prefix)
            & quantity.endswith(pattern.suffix)
            & (F.length(quantity) > len(pattern.prefix) + len(pattern.suffix))
        )
    return wanted


def joined_quantities(quantity: Column, plan: JoinPlan) -> Column:
    """Whether a record's quantity is one the plan joins, as a Spark condition."""
    return wanted_quantities(quantity, plan.config(()).quantities, plan.quantity_patterns)


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
#: ... with the operation statistics beside the join: which stage set a late record aside, and
#: the statistics' encoded records.
WITH_STATISTICS: list[tuple[str, str]] = operation_stats.with_encoded(
    [*OUTPUT_FIELDS, ("stage", "string")]
)


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
    plan: JoinPlan, max_future: timedelta | None = None, idle_timeout: timedelta = timedelta(0)
) -> OperatorFunction:
    """The per-thing function Spark calls with the thing's rows of one micro-batch, or without
    rows when its idle flush is due."""
    return OperatorFunction(
        JoinOperator(plan, max_future, idle_timeout),
        JoinRows(),
        OUTPUT_FIELDS,
        timers=bool(idle_timeout),
    )


def join_pass(settings: JoinSettings) -> OperatorFunction:
    """The join job's per-thing function: the join and, with OPSTATS_POWER, the operation
    statistics beside it in the thing's one state (``Together``, as in the single pass), so
    its cycles go out in the pairs' transaction."""
    plan = join_plan(settings)
    idle = settings.idle_flush()
    joiner = JoinOperator(plan, settings.max_future, idle)
    statistics = operation_stats.stats_operator(settings)
    if statistics is None:
        return OperatorFunction(joiner, JoinRows(), OUTPUT_FIELDS, timers=bool(idle))
    return OperatorFunction(
        Together((STAGE, joiner, plan.selects), (operation_stats.STAGE, statistics, None)),
        PartRows({STAGE: JoinRows(), operation_stats.STAGE: operation_stats.stats_rows(settings)}),
        WITH_STATISTICS,
        timers=bool(idle),
    )


def input_quantities(quantity: Column, settings: JoinSettings) -> Column:
    """Whether the job needs a record: the plan joins its quantity, or it is an input of the
    statistics."""
    wanted = joined_quantities(quantity, join_plan(settings))
    if operation_stats.enabled(settings):
        power = operation_stats.power_inputs(settings.opstats_power)
        wanted = wanted | wanted_quantities(quantity, (), (power.left, power.right))
    return wanted


def to_kafka_records(
    rows: DataFrame, settings: JoinSettings, partitions: dict[str, int]
) -> DataFrame:
    """Joined pairs keyed by their id, late records keyed as in the raw topic, both partitioned by
    thing, so a thing's results keep the join's order for the aggregates over them; with the
    statistics, their cycles and overload alerts as they were encoded."""
    from pyspark.sql import functions as F

    statistics = operation_stats.enabled(settings)
    routes = [
        outputs.joined_route(
            settings.joined_topic,
            partitions[settings.joined_topic],
            registry_header(settings, settings.joined_topic, "joined"),
        ),
        outputs.late_route(
            settings.late_topic,
            partitions[settings.late_topic],
            F.col("stage") if statistics else F.lit(STAGE),
            F.lit(None),
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


def build_join(settings: JoinSettings):
    """The job's query: raw measurements in, Kafka records (topic, key, value) out."""
    from spark_jobs.runner import read_measurements, topic_partitions

    function = join_pass(settings)
    topics = [settings.joined_topic, settings.late_topic, settings.dlq_topic]
    if operation_stats.enabled(settings):
        topics += operation_stats.topics(settings).values()
    partitions = {topic: topic_partitions(settings, topic) for topic in topics}

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
