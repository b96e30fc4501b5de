"""python -m spark_jobs.single_pass: the join and the window aggregates in one stateful pass per thing.

One Spark application reads and decodes the raw topic once, hands each thing's records of a
micro-batch once to Python, and writes joined pairs, final windows, late records and dead
letters in one transaction per batch. Run as two jobs (``spark_jobs.join`` and
``spark_jobs.aggregate``) the same work costs two JVMs, two reads and decodes of every record,
two Arrow round trips and two transactions per batch.

The output is, record for record, what the two jobs write: the thing's function runs the join's
function (``GroupJoiner``) and, per quantity, the windows' function (``WindowFunction``) on
the same rows, each on its own slot of the thing's state, so the join's and the windows'
properties hold unchanged. Only the idle timeout moves: Spark's timer is per thing, so each
quantity keeps its own deadline in the state and the thing's timer is set to the earliest; a
quantity falls idle as before even while the thing's other quantities keep coming.
"""

from __future__ import annotations

import json
import struct
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from spark_jobs import aggregate, dead_letters, join, outputs
from spark_jobs.config import SinglePassSettings
from spark_jobs.job import StreamingJob
from spark_jobs.key_records import KeyRecords
from spark_jobs.output_columns import Fields, OutputRows

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

SERVICE = "spark_single_pass"
STAGE = "single_pass"  #: the dead letters' stage; late records keep the join's or the aggregate's


def _wider(*field_lists: Fields) -> Fields:
    """Every column of the lists once, in first-seen order, dead-letter columns last."""
    seen: dict[str, str] = {}
    for name, kind in (
        f for fields in field_lists for f in fields if f not in dead_letters.OUTPUT_FIELDS
    ):
        if seen.setdefault(name, kind) != kind:
            raise TypeError(f"column {name} is {seen[name]} in one job and {kind} in another")
    return [*seen.items(), *dead_letters.OUTPUT_FIELDS]


#: The join's and the aggregate's columns, plus which stage set a late record aside.
OUTPUT_FIELDS: Fields = _wider(join.OUTPUT_FIELDS, aggregate.OUTPUT_FIELDS, [("stage", "string")])
OUTPUT_SCHEMA = ", ".join(f"{name} {kind}" for name, kind in OUTPUT_FIELDS)
#: The join's state, and every quantity's windows' state with its idle deadline packed into one
#: binary (``ThingState.pack_windows``). Binary columns only: for a state with array columns Spark
#: generates and compiles its state (de)serializers anew in every batch (new classes for the JIT,
#: every batch; README, "A live micro-batch and where its time goes").
STATE_SCHEMA = "lsb binary, windows binary"
NO_DEADLINE = 0
_HEADER = "<I"  #: the JSON header's size (a format, not a Struct: the job's classes are pickled)


class Slot:
    """One part of a thing's state, speaking the few GroupState methods the join's and the
    windows' functions use, so they run here exactly as in their own jobs."""

    def __init__(self, value: tuple | None, now_ms: int, timed_out: bool = False) -> None:
        self.value = value
        self.now_ms = now_ms
        self.hasTimedOut = timed_out
        self.deadline_ms = (
            NO_DEADLINE  # as Spark: a call without setTimeoutDuration clears the timer
        )

    @property
    def exists(self) -> bool:
        return self.value is not None

    @property
    def get(self) -> tuple:
        return self.value

    def update(self, value: tuple) -> None:
        self.value = value

    def getCurrentProcessingTimeMs(self) -> int:
        return self.now_ms

    def setTimeoutDuration(self, duration_ms: int) -> None:
        self.deadline_ms = self.now_ms + int(duration_ms)


@dataclass
class ThingState:
    """A thing's state: the join's value and, per quantity, the windows' value and deadline."""

    lsb: tuple | None = None
    windows: dict[str, tuple] = field(default_factory=dict)
    deadlines: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_row(cls, row: tuple) -> ThingState:
        lsb, packed = row
        state = cls(None if lsb is None else (lsb,))
        if packed:
            state.unpack_windows(bytes(packed))
        return state

    def to_row(self) -> tuple:
        return None if self.lsb is None else self.lsb[0], self.pack_windows()

    def pack_windows(self) -> bytes:
        """Per quantity (sorted) its windows' state (aggregate.STATE_SCHEMA's columns) and its
        deadline: a JSON header of the numbers, strings and blob sizes, then the blobs."""
        header, blobs = [], []
        for quantity in sorted(self.windows):
            clock, horizon, times, values, row_ids, last_batch = self.windows[quantity]
            header.append(
                [
                    quantity,
                    int(clock),
                    int(horizon),
                    len(times),
                    len(values),
                    row_ids,
                    int(last_batch),
                    int(self.deadlines.get(quantity, NO_DEADLINE)),
                ]
            )
            blobs += (times, values)
        head = json.dumps(header, separators=(",", ":")).encode()
        return b"".join([struct.pack(_HEADER, len(head)), head, *blobs])

    def unpack_windows(self, packed: bytes) -> None:
        (size,) = struct.unpack_from(_HEADER, packed)
        start = struct.calcsize(_HEADER)
        at = start + size
        for (
            quantity,
            clock,
            horizon,
            n_times,
            n_values,
            row_ids,
            last_batch,
            deadline,
        ) in json.loads(packed[start:at]):
            times, values = (
                packed[at : at + n_times],
                packed[at + n_times : at + n_times + n_values],
            )
            at += n_times + n_values
            self.windows[quantity] = (clock, horizon, times, values, row_ids, last_batch)
            self.deadlines[quantity] = deadline

    def keep(self, quantity: str, slot: Slot) -> None:
        """A quantity's windows' state and deadline after its function ran on ``slot``."""
        self.windows[quantity], self.deadlines[quantity] = slot.value, slot.deadline_ms

    def due(self, now_ms: int) -> list[str]:
        """Quantities whose idle deadline has passed (those with data in the batch have just
        been given a new one)."""
        return sorted(q for q, at in self.deadlines.items() if at != NO_DEADLINE and at <= now_ms)

    def next_deadline(self) -> int:
        return min((at for at in self.deadlines.values() if at != NO_DEADLINE), default=NO_DEADLINE)


class ThingPass:
    """The per-thing function of ``applyInPandasWithState``. Picklable."""

    def __init__(self, joiner: join.GroupJoiner, windows: aggregate.WindowFunction) -> None:
        self.joiner = joiner
        self.windows = windows
        self.join_quantities = list(joiner.config.quantities)

    def __call__(
        self, key: tuple, frames: Iterator[pd.DataFrame], state: Any
    ) -> Iterator[pd.DataFrame]:
        thing = key[0]
        if thing is None:  # records that did not decode: handed back, no state
            yield dead_letters.rows(OUTPUT_FIELDS, frames)
            return
        now = int(state.getCurrentProcessingTimeMs())
        held = ThingState.from_row(state.get) if state.exists else ThingState()
        out = OutputRows(OUTPUT_FIELDS, aggregate.NULLABLE)
        if not state.hasTimedOut:
            records = KeyRecords.arrival_order(frames)
            joined = np.isin(records.quantity, self.join_quantities)
            if joined.any():
                slot = Slot(held.lsb, now)
                self.joiner.step(thing, records.take(joined), slot, out, stage=join.STAGE)
                held.lsb = slot.value
            for quantity, mine in records.by_quantity():
                slot = Slot(held.windows.get(quantity), now)
                self.windows.step(thing, quantity, mine, slot, out, stage=aggregate.STAGE)
                held.keep(quantity, slot)
        for quantity in held.due(now):
            slot = Slot(held.windows[quantity], now, timed_out=True)
            self.windows.expire(thing, quantity, slot, out, stage=aggregate.STAGE)
            held.keep(quantity, slot)
        state.update(held.to_row())
        deadline = held.next_deadline()
        if deadline != NO_DEADLINE:
            state.setTimeoutDuration(max(1, deadline - now))
        if len(out):
            yield out.frame()


def thing_pass(settings: SinglePassSettings) -> ThingPass:
    return ThingPass(
        join.GroupJoiner(join.join_config(settings), settings.max_future_ms()),
        aggregate.WindowFunction(settings.window_rules(), settings.idle_timeout_ms()),
    )


def to_kafka_records(
    rows: DataFrame, settings: SinglePassSettings, partitions: dict[str, int]
) -> DataFrame:
    """Pairs, windows and late records, keyed and partitioned as the two jobs write them."""
    from pyspark.sql import functions as F

    routes = [
        outputs.joined_route(settings.joined_topic, partitions[settings.joined_topic]),
        outputs.aggregate_route(settings.aggregates_topic, partitions[settings.aggregates_topic]),
        outputs.late_route(
            settings.late_topic,
            partitions[settings.late_topic],
            F.col("stage"),
            F.when(F.col("stage") == aggregate.STAGE, F.col("watermark_ms")),
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


def build(settings: SinglePassSettings):
    """The job's query: raw measurements in, Kafka records out."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    from spark_jobs.runner import read_measurements, topic_partitions

    function = thing_pass(settings)
    timeout = (
        GroupStateTimeout.ProcessingTimeTimeout
        if settings.idle_timeout_ms()
        else GroupStateTimeout.NoTimeout
    )
    partitions = {
        topic: topic_partitions(settings, topic)
        for topic in (
            settings.joined_topic,
            settings.aggregates_topic,
            settings.late_topic,
            settings.dlq_topic,
        )
    }

    def query(spark: SparkSession) -> DataFrame:
        rows = (
            read_measurements(spark, settings)
            .select(*aggregate.MEASUREMENT_COLUMNS)
            .groupBy("thing")
            .applyInPandasWithState(function, OUTPUT_SCHEMA, STATE_SCHEMA, "append", timeout)
        )
        return to_kafka_records(rows, settings, partitions)

    return query


def check(settings: SinglePassSettings) -> None:
    """Fail fast on bad JOIN_PAIRS or window rules, before Spark starts."""
    thing_pass(settings)


JOB = StreamingJob(
    SERVICE,
    "spark_jobs.single_pass",
    __doc__,
    SinglePassSettings,
    lambda _: "single-pass",
    build,
    check,
)
main = JOB.main


if __name__ == "__main__":
    sys.exit(main())
