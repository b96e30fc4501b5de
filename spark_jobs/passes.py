"""The per-key functions each job runs, built from its settings: the join's plan and the
operators of the join job, the aggregate job and the single pass, each in the one Spark adapter
(:class:`~spark_jobs.stateful.OperatorFunction`) with its renderer (:mod:`spark_jobs.renderers`);
and the Spark conditions that let through only the records a job needs.

The entry modules (``join``, ``aggregate``, ``single_pass``) take what they run from here and
never from each other.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from lsb import JoinOperator, PairSpec
from lsb.plan import JoinPlan, PatternPair
from operators import (
    ByQuantity,
    Emitted,
    KeyedOperator,
    Pattern,
    QuantityLimit,
    Retention,
    Together,
    is_pattern,
)
from operators.limit import STAGE as LIMIT_STAGE
from spark_jobs.config import (
    IdleSettings,
    JoinSettings,
    SinglePassSettings,
    WindowSettings,
    result_function,
)
from spark_jobs.operation_stats import STAGE as STATS_STAGE
from spark_jobs.operation_stats import enabled, power_inputs, stats_operator
from spark_jobs.output_columns import Fields
from spark_jobs.renderers import (
    JOIN_FIELDS,
    JOIN_STAGE,
    JOIN_WITH_STAGE,
    JOIN_WITH_STATISTICS,
    NULLABLE,
    SINGLE_PASS_FIELDS,
    WINDOW_WITH_STAGE,
    JoinRows,
    PartRows,
    QuantityRows,
    StatsRows,
    refused_rows,
    stats_rows,
    thing_rows,
    window_rows,
    with_encoded,
)
from spark_jobs.stateful import OperatorFunction
from streamkit.errors import ConfigError
from windowing import STAGE as WINDOW_STAGE
from windowing import WindowOperator

O = TypeVar("O")  # noqa: E741

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame


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


def input_quantities(quantity: Column, settings: JoinSettings) -> Column:
    """Whether the job needs a record: the plan joins its quantity, or it is an input of the
    statistics."""
    wanted = joined_quantities(quantity, join_plan(settings))
    if enabled(settings):
        power = power_inputs(settings.opstats_power)
        wanted = wanted | wanted_quantities(quantity, (), (power.left, power.right))
    return wanted


def join_function(
    plan: JoinPlan, max_future: timedelta | None = None, idle_timeout: timedelta = timedelta(0)
) -> OperatorFunction:
    """The per-thing function Spark calls with the thing's rows of one micro-batch, or without
    rows when its idle flush is due."""
    return OperatorFunction(
        JoinOperator(plan, max_future, idle_timeout),
        JoinRows(),
        JOIN_FIELDS,
        timers=bool(idle_timeout),
    )


def kept(operator: KeyedOperator[Any, O], retention: timedelta, idle: timedelta) -> KeyedOperator:
    """``operator`` whose keys are dropped after ``retention`` without a record (STATE_RETENTION;
    0: never), a timer later than the idle timeout counting as a job that was not running."""
    return Retention(operator, retention, idle) if retention else operator


def limited(operator: KeyedOperator[Any, Emitted], settings: IdleSettings) -> KeyedOperator:
    """A thing's operator behind its limit of quantity names (THING_MAX_QUANTITIES: a pattern
    pair, the windows and the statistics make state for every name a thing sends), dropped
    after its retention."""
    limit = QuantityLimit(operator, settings.max_quantities)
    return kept(limit, settings.retention(), settings.idle_flush())


def join_pass(settings: JoinSettings) -> OperatorFunction:
    """The join job's per-thing function: the join and, with OPSTATS_POWER, the operation
    statistics beside it in the thing's one state (``Together``, as in the single pass), so
    its cycles go out in the pairs' transaction; behind the thing's limit of names."""
    plan = join_plan(settings)
    idle = settings.idle_flush()
    parts: list[tuple[str, KeyedOperator, Any]] = [
        (JOIN_STAGE, JoinOperator(plan, settings.max_future, idle), plan.selects)
    ]
    renders: dict[str, Any] = {LIMIT_STAGE: refused_rows, JOIN_STAGE: JoinRows()}
    statistics = stats_operator(settings)
    if statistics is not None:
        parts.append((STATS_STAGE, statistics, None))
        renders[STATS_STAGE] = stats_rows(settings)
    return OperatorFunction(
        limited(Together(*parts), settings),
        PartRows(renders),
        JOIN_WITH_STAGE if statistics is None else JOIN_WITH_STATISTICS,
        timers=bool(idle),
    )


def window_pass(settings: WindowSettings) -> OperatorFunction:
    """The aggregate job's per-thing function: every quantity's windows (``ByQuantity``, each
    with its own state and idle deadline, as in the single pass), behind the thing's limit of
    names and dropped after its retention. Keyed by thing rather than by (thing, quantity) so
    that one state holds the names a thing may have."""
    idle = settings.idle_flush()
    windows = Together(
        (WINDOW_STAGE, ByQuantity(WindowOperator(settings.window_rules(), idle)), None)
    )
    return OperatorFunction(
        limited(windows, settings),
        PartRows({LIMIT_STAGE: refused_rows, WINDOW_STAGE: QuantityRows(window_rows)}),
        WINDOW_WITH_STAGE,
        NULLABLE,
        timers=bool(idle),
    )


def window_records(measured: DataFrame, settings: WindowSettings) -> DataFrame:
    """Aggregates and late records (WINDOW_WITH_STAGE rows) from a measurement stream."""
    return window_pass(settings).apply(measured.groupBy("thing"))


def thing_operator(settings: SinglePassSettings, plan: JoinPlan) -> Together:
    """The join on its quantities and every quantity's windows, on one thing's records; with
    OPSTATS_POWER, the operation statistics of every component too."""
    parts: list[tuple[str, KeyedOperator, Any]] = [
        (
            JOIN_STAGE,
            JoinOperator(plan, settings.max_future, settings.idle_flush()),
            plan.selects,
        ),
        (
            WINDOW_STAGE,
            ByQuantity(WindowOperator(settings.window_rules(), settings.idle_flush())),
            None,
        ),
    ]
    statistics = stats_operator(settings)
    if statistics is not None:
        parts.append((STATS_STAGE, statistics, None))
    return Together(*parts)


def output_fields(settings: SinglePassSettings) -> Fields:
    """The columns, with the statistics' encoded records when they run."""
    on = enabled(settings)
    return with_encoded(SINGLE_PASS_FIELDS) if on else SINGLE_PASS_FIELDS


def statistics_rows(settings: SinglePassSettings) -> StatsRows | None:
    """The statistics' renderer when they run (asks the registry for its headers when on)."""
    return stats_rows(settings) if enabled(settings) else None


def thing_pass(settings: SinglePassSettings) -> OperatorFunction:
    """The per-thing function Spark calls with the thing's rows of one micro-batch, or without
    rows when the earliest idle timer of its parts fired."""
    return OperatorFunction(
        limited(thing_operator(settings, join_plan(settings)), settings),
        thing_rows(statistics_rows(settings)),
        output_fields(settings),
        NULLABLE,
        timers=bool(settings.idle_flush()),
    )
