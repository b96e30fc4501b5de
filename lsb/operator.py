"""The join as a keyed operator (``operators.contract``): one thing's records in, pairs out.

A batch is the thing's records of every quantity in arrival order. Records stamped further
ahead of the batch's processing time than ``max_future`` are set aside first
(``future_timestamp``) and the rest joined as if they had never come: one bad device clock must
not move a stream's watermark for good. With pattern pairs (``lsb.plan``) a thing's config
grows by each component its records show, and each call says which config its output is of.

A thing that falls silent would keep its last pairs pending until it runs again (a pair waits
for the next record of the other stream). With an idle timeout its timer, armed by each batch
with its records, flushes them after that much processing time: the one exception to "a
function of the data alone", as for the windows. A timer due more than two idle periods after
the thing's last batch means nothing ran meanwhile (a stop, a crash): it is armed again
instead. :meth:`JoinOperator.finish` (end of stream) emits every pair still pending.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import ClassVar

from operators.codec import Reader, Writer
from operators.contract import KeyedOperator
from operators.records import Records
from operators.time import to_ms

from .batch import BatchResult, flush, process_batch, rest
from .config import JoinConfig
from .plan import JoinPlan
from .serde import KIND, Entries, read_entries, write_state
from .state import JoinState


@dataclass
class JoinStep:
    """What one call emitted: the records set aside for a future timestamp, the records that
    were joined (``result.late.index`` points into them), the join's result and the config its
    pair and quantity codes are of."""

    ahead: Records
    joined: Records
    result: BatchResult
    config: JoinConfig


class JoinOperator(KeyedOperator[JoinState, JoinStep]):
    kind: ClassVar[str] = KIND

    def __init__(
        self,
        config: JoinConfig | JoinPlan,
        max_future: timedelta | None = None,
        idle_timeout: timedelta = timedelta(0),
    ) -> None:
        self.plan = config if isinstance(config, JoinPlan) else JoinPlan.of(config)
        #: the explicit pairs: a thing's config before any component
        self.config = self.plan.config(())
        self.max_future_ms = (
            None if max_future is None else to_ms(max_future, what="max future", allow_zero=True)
        )
        #: the idle flush's processing time after a batch (0: never)
        self.idle_ms = to_ms(idle_timeout, what="idle timeout", allow_zero=True)

    def initial(self) -> JoinState:
        return JoinState.empty(self.config)

    def config_of(self, state: JoinState) -> JoinConfig:
        """The config ``state`` is aligned with."""
        return self.plan.config(state.components)

    def process(self, state: JoinState, batch: Records, now_ms: int) -> tuple[JoinState, JoinStep]:
        ahead = Records.empty()
        if self.max_future_ms is not None:
            future = batch.event_time_ms > now_ms + self.max_future_ms
            if future.any():
                ahead, batch = batch.take(future), batch.take(~future)
        config = self.config_of(state)
        grown = self.plan.grown(config, batch.quantity)
        if grown is not config:
            state, config = Entries.of(state, config).state(grown), grown
        result = process_batch(config, state, batch.quantity, batch.event_time_ms, batch.value)
        state = result.state
        if self.idle_ms and len(batch):
            state.last_call_ms, state.deadline_ms = now_ms, now_ms + self.idle_ms
        return state, JoinStep(ahead, batch, result, config)

    def deadline(self, state: JoinState) -> int | None:
        """The idle flush's time; None without an idle timeout (a state written with one)."""
        return state.deadline_ms if self.idle_ms else None

    def on_timer(self, state: JoinState, now_ms: int) -> tuple[JoinState, JoinStep | None]:
        if now_ms - state.last_call_ms > 2 * self.idle_ms:
            state.last_call_ms, state.deadline_ms = now_ms, now_ms + self.idle_ms
            return state, None
        config = self.config_of(state)
        result = rest(config, state)
        result.state.deadline_ms = None
        if not len(result.pairs) and not len(result.late):
            return result.state, None
        empty = Records.empty()
        return result.state, JoinStep(empty, empty, result, config)

    def finish(self, state: JoinState) -> tuple[JoinState, JoinStep]:
        config = self.config_of(state)
        result = flush(config, "", state)
        empty = Records.empty()
        return result.state, JoinStep(empty, empty, result, config)

    def write(self, state: JoinState, out: Writer) -> None:
        write_state(state, self.config_of(state), out)

    def read(self, data: Reader) -> JoinState:
        entries = read_entries(data)
        return entries.state(self.plan.config(self.plan.components_of(entries.quantities)))


__all__ = ["JoinOperator", "JoinStep"]
