"""The join as a keyed operator (``operators.contract``): one thing's records in, pairs out.

A batch is the thing's records of every quantity in arrival order. Records stamped further
ahead of the batch's processing time than ``max_future_ms`` are set aside first
(``future_timestamp``) and the rest joined as if they had never come: one bad device clock must
not move a stream's watermark for good. The join has no timers; :meth:`JoinOperator.finish`
(end of stream) emits every pair still pending.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from operators.codec import Reader, Writer
from operators.contract import KeyedOperator
from operators.records import Records

from .batch import BatchResult, flush, process_batch
from .config import JoinConfig
from .serde import KIND, read_state, write_state
from .state import JoinState


@dataclass
class JoinStep:
    """What one call emitted: the records set aside for a future timestamp, the records that
    were joined (``result.late.index`` points into them) and the join's result."""

    ahead: Records
    joined: Records
    result: BatchResult


class JoinOperator(KeyedOperator[JoinState, JoinStep]):
    kind: ClassVar[str] = KIND

    def __init__(self, config: JoinConfig, max_future_ms: int | None = None) -> None:
        self.config = config
        self.max_future_ms = max_future_ms

    def initial(self) -> JoinState:
        return JoinState.empty(self.config)

    def process(self, state: JoinState, batch: Records, now_ms: int) -> tuple[JoinState, JoinStep]:
        ahead = Records.empty()
        if self.max_future_ms is not None:
            future = batch.event_time_ms > now_ms + self.max_future_ms
            if future.any():
                ahead, batch = batch.take(future), batch.take(~future)
        result = process_batch(self.config, state, batch.quantity, batch.event_time_ms, batch.value)
        return result.state, JoinStep(ahead, batch, result)

    def finish(self, state: JoinState) -> tuple[JoinState, JoinStep]:
        result = flush(self.config, "", state)
        empty = Records.empty()
        return result.state, JoinStep(empty, empty, result)

    def write(self, state: JoinState, out: Writer) -> None:
        write_state(state, self.config, out)

    def read(self, data: Reader) -> JoinState:
        return read_state(data, self.config)


__all__ = ["JoinOperator", "JoinStep"]
