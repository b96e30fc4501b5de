"""The executors' rendering of rows: what each operator emitted, as the plain output rows its
state function hands back to Spark (or the driver's table hands to its writer).

One renderer per operator (the join's pairs and late records, a quantity's windows, the
statistics' cycles and alerts, already encoded) and one per composition (``Together``'s parts
tagged with their stage, ``ByQuantity``'s quantities), with the columns of each job's rows.
Everything here is picklable: it runs in Spark's Python workers.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from lsb import JoinStep
from operators import NO_TIME, Emitted, Records
from operators.limit import STAGE as LIMIT_STAGE
from operators.reasons import FUTURE_TIMESTAMP, QUANTITY_LIMIT, SUPERSEDED
from opstats import StatsStep
from spark_jobs import dead_letters
from spark_jobs.config import StatisticsSettings
from spark_jobs.operation_stats import (
    STAGE as STATS_STAGE,
)
from spark_jobs.operation_stats import (
    cycle_record,
    event_record,
    say_defaulted,
)
from spark_jobs.output_columns import Fields, OutputRows, Render
from spark_jobs.outputs import OPSTATS, OVERLOAD
from streamkit.wire import AvroCodec, cycle_key, overload_key
from streamkit.wire.registry import header as registry_header
from windowing import STAGE as WINDOW_STAGE
from windowing import Step


@dataclass(frozen=True)
class PartRows:
    """Renders what ``operators.Together`` emitted: each part's output by that part's render,
    its rows tagged with the part's name as their ``stage``. Picklable."""

    renders: dict[str, Render]

    def __call__(
        self, out: OutputRows, key: tuple, batch: Records, emitted: Emitted, tags: dict[str, Any]
    ) -> None:
        for part, records, output in emitted:
            self.renders[part](out, key, records, output, {**tags, "stage": part})


@dataclass(frozen=True)
class QuantityRows:
    """Renders what ``operators.ByQuantity`` emitted for a thing: each quantity's output by
    ``render`` under the key (thing, quantity). Picklable."""

    render: Render

    def __call__(
        self, out: OutputRows, key: tuple, batch: Records, emitted: Emitted, tags: dict[str, Any]
    ) -> None:
        for quantity, mine, output in emitted:
            self.render(out, (key[0], quantity), mine, output, tags)


JOIN_STAGE = "join"  #: the late records' stage


#: What the state function hands back: one row per joined pair or late record, as plain
#: columns. Avro encoding and keys are Spark expressions (``to_kafka_records``): encoding in the
#: Python worker was most of the worker's time (the figure: README, Spark join).
JOIN_FIELDS: Fields = [
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


#: The columns of a record the state function encoded itself: its Kafka key and value.
ENCODED_FIELDS: Fields = [("avro_key", "binary"), ("avro_value", "binary")]


def with_encoded(fields: Fields) -> Fields:
    """The output columns, plus the encoded records' key and value."""
    return [*fields, *ENCODED_FIELDS]


#: ... with which stage set a late record aside (the join, or the limit of quantity names).
JOIN_WITH_STAGE: Fields = [*JOIN_FIELDS, ("stage", "string")]
#: ... with the operation statistics beside the join: their stage too, and their encoded records.
JOIN_WITH_STATISTICS: Fields = with_encoded(JOIN_WITH_STAGE)


class JoinRows:
    """Renders what the join operator emitted for a thing as output rows: records set aside for
    a future timestamp, joined pairs, late records (each kind's other columns are filler:
    ``to_kafka_records`` reads only its own kind's). Names come from the config each step is
    of (a thing's pairs grow with its components). Picklable."""

    def __call__(
        self, out: OutputRows, key: tuple, batch: Records, step: JoinStep, tags: dict[str, Any]
    ) -> None:

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


#: What the state function hands back: aggregates and late records as plain columns (Avro and
#: keys are Spark expressions in ``to_kafka_records``).
WINDOW_FIELDS: Fields = [
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


#: Long columns that may be null (a record compared with no horizon yet; windows have none; a
#: window an idle flush closed has no record that closed it).
NULLABLE = frozenset({"watermark_ms", "closed_at_ms"})


def window_rows(
    out: OutputRows, key: tuple, batch: Records, step: Step, tags: dict[str, Any]
) -> None:
    """Renders what the windows operator emitted for a (thing, quantity) as output rows: final
    windows, set-aside records and superseded copies (each kind's other columns are filler)."""

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


@dataclass(frozen=True)
class StatsRows:
    """Renders a statistics step: its cycles as ``opstats`` rows and its overload alerts as
    ``overload`` rows, each with its Kafka key and value (the registry's header, when on, in
    front), its handed-back records as late rows. Picklable: it runs in Spark's workers."""

    cycle_header: bytes = b""
    event_header: bytes = b""

    def __call__(
        self, out: OutputRows, key: tuple, batch: Records, step: StatsStep, tags: dict[str, Any]
    ) -> None:
        thing = key[0]
        for cycle in step.cycles:
            if cycle.rating.defaulted:
                say_defaulted(thing, cycle.component)
        cycles, events = _codec("opstats"), _codec("overload")
        _add_encoded(
            out,
            OPSTATS,
            thing,
            [
                (
                    cycle_key(thing, c.component, c.rating_id, c.start_ms),
                    self.cycle_header + cycles.encode(cycle_record(thing, step.power_name, c)),
                )
                for c in step.cycles
            ],
            tags,
        )
        _add_encoded(
            out,
            OVERLOAD,
            thing,
            [
                (
                    overload_key(thing, e.cycle.component),
                    self.event_header + events.encode(event_record(thing, e)),
                )
                for e in step.events
            ],
            tags,
        )
        late: Records = step.late
        if len(late):
            out.add(
                len(late),
                record_type="late",
                thing=thing,
                quantity=late.quantity,
                event_time_ms=late.event_time_ms,
                value=late.value,
                row_id=late.row_id,
                reason=np.array(step.reasons, dtype=object),
                **tags,
            )


def _add_encoded(
    out: OutputRows,
    record_type: str,
    thing: str,
    records: list[tuple[bytes, bytes]],
    tags: dict[str, Any],
) -> None:
    """(key, value) records of ``thing`` as rows of ``record_type``."""
    if records:
        out.add(
            len(records),
            record_type=record_type,
            thing=thing,
            avro_key=_objects([key for key, _ in records]),
            avro_value=_objects([value for _, value in records]),
            **tags,
        )


def stats_rows(settings: StatisticsSettings) -> StatsRows:
    """The renderer with the registry's headers of the statistics' topics (asks the registry
    when it is on: call it where the job is built, not in a start-up check)."""
    return StatsRows(
        registry_header(settings, settings.opstats_topic, "opstats"),
        registry_header(settings, settings.overloads_topic, "overload"),
    )


@functools.cache
def _codec(schema: str) -> AvroCodec:
    return AvroCodec(schema)


def _objects(items: list[bytes]) -> np.ndarray:
    column = np.empty(len(items), dtype=object)
    column[:] = items
    return column


def _wider(*field_lists: Fields) -> Fields:
    """Every column of the lists once, in first-seen order, dead-letter columns last."""
    seen: dict[str, str] = {}
    for name, kind in (
        f for fields in field_lists for f in fields if f not in dead_letters.OUTPUT_FIELDS
    ):
        if seen.setdefault(name, kind) != kind:
            raise TypeError(f"column {name} is {seen[name]} in one job and {kind} in another")
    return [*seen.items(), *dead_letters.OUTPUT_FIELDS]


#: The aggregate's columns, plus which stage set a late record aside (the windows, or the limit
#: of quantity names).
WINDOW_WITH_STAGE: Fields = _wider(WINDOW_FIELDS, [("stage", "string")])
#: The join's and the aggregate's columns, plus which stage set a late record aside.
SINGLE_PASS_FIELDS: Fields = _wider(JOIN_FIELDS, WINDOW_FIELDS, [("stage", "string")])


def refused_rows(
    out: OutputRows, key: tuple, batch: Records, refused: Records, tags: dict[str, Any]
) -> None:
    """The records of quantity names beyond the thing's limit (``operators.limit``), as late
    rows."""
    out.add(
        len(refused),
        record_type="late",
        thing=key[0],
        quantity=refused.quantity,
        event_time_ms=refused.event_time_ms,
        value=refused.value,
        row_id=refused.row_id,
        reason=QUANTITY_LIMIT,
        **tags,
    )


def thing_rows(statistics: StatsRows | None = None) -> PartRows:
    """Renders what the thing's operator emitted: the records of names beyond its limit, the
    join's part as the join job does, each quantity's windows as the aggregate job does, the
    statistics' cycles when they run, each tagged with its stage. Picklable."""
    renders: dict[str, Render] = {
        LIMIT_STAGE: refused_rows,
        JOIN_STAGE: JoinRows(),
        WINDOW_STAGE: QuantityRows(window_rows),
    }
    if statistics is not None:
        renders[STATS_STAGE] = statistics
    return PartRows(renders)
