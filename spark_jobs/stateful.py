"""The one adapter from the keyed-operator contract (``operators``) to Spark's stateful API.

Spark's ``applyInPandasWithState`` calls a function per key and micro-batch with the key's rows
and a GroupState. :class:`OperatorFunction` is that function for any keyed operator: it
restores the key's state from its one binary value, feeds the rows in arrival order to
``process``, fires the operator's timer when it is due, stores the snapshot and hands the
operator's next deadline to Spark's processing-time timeout. What the operator emitted becomes
output rows through the job's ``render`` function; records that did not decode come back as
dead letters without touching any state.

Why applyInPandasWithState rather than transformWithStateInPandas: with the operators' state a
single binary value per key, the richer state API (several typed states, timers of its own)
buys nothing, and the older API warms up sooner after a start
(benchmarks/experiments/bench_state_api.py compares the two on the join).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from operators import KeyedOperator, drive
from spark_jobs import dead_letters
from spark_jobs.key_records import arrival_order
from spark_jobs.output_columns import Fields, OutputRows, Render

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame
    from pyspark.sql.group import GroupedData

#: Columns every operator's input must provide: a measurement's fields, its arrival order (a
#: key's records are processed in Kafka offset order) and what a bad record's dead letter needs.
MEASUREMENT_COLUMNS = (
    "thing",
    "quantity",
    "event_time_ms",
    "value",
    "row_id",
    "kafka_partition",
    "kafka_offset",
    *dead_letters.INPUT_COLUMNS,
)

#: Every operator's state: its snapshot (``operators.codec``), one binary column. Binary
#: columns only: for a state with array columns Spark generates and compiles its state
#: (de)serializers anew in every batch.
STATE_SCHEMA = "state binary"


class OperatorFunction:
    """The per-key function of ``applyInPandasWithState`` running ``operator``. Picklable."""

    def __init__(
        self,
        operator: KeyedOperator,
        render: Render,
        fields: Fields,
        nullable: frozenset[str] = frozenset(),
        timers: bool = False,
    ) -> None:
        self.operator = operator
        self.render = render
        self.fields = fields
        self.nullable = nullable
        #: whether the operator may ask for a timer (Spark then needs a processing-time timeout)
        self.timers = timers

    @property
    def output_schema(self) -> str:
        return ", ".join(f"{name} {kind}" for name, kind in self.fields)

    def __call__(
        self, key: tuple, frames: Iterable[pd.DataFrame], state: Any
    ) -> Iterator[pd.DataFrame]:
        if key[0] is None:  # records that did not decode: handed back, no state, no timer
            yield dead_letters.rows(self.fields, frames)
            return
        operator = self.operator.for_key(key[0])
        now = int(state.getCurrentProcessingTimeMs())
        current = operator.restore(state.get[0] if state.exists else None)
        out = OutputRows(self.fields, self.nullable)
        # Spark calls a timed-out key without rows
        batch = None if state.hasTimedOut else arrival_order(frames)
        driven = drive(operator, current, batch, now)
        for records, emitted in driven.emitted:
            self.render(out, key, records, emitted, {})
        if driven.gone:  # it emitted what it owed: nothing is kept, no timer
            state.remove()
        else:
            state.update((operator.snapshot(driven.state),))
        if driven.deadline is not None:  # as Spark: a call that sets no timeout clears the timer
            state.setTimeoutDuration(max(1, driven.deadline - now))
        if len(out):
            yield out.frame()

    def apply(self, grouped: GroupedData) -> DataFrame:
        """``grouped.applyInPandasWithState`` with this function, its schemas and timeout."""
        from pyspark.sql.streaming.state import GroupStateTimeout

        timeout = (
            GroupStateTimeout.ProcessingTimeTimeout if self.timers else GroupStateTimeout.NoTimeout
        )
        return grouped.applyInPandasWithState(
            self, self.output_schema, STATE_SCHEMA, "append", timeout
        )
