"""A key's state dropped once the key has been silent for a retention, after it emits what it
still owes.

A machine that is retired or renamed never sends again; without this its key's state (join
buffers, open windows, statistics, admitted names) would stay for ever, in the driver and in
Spark's store. :class:`Retention` finishes a key that had no record for ``retention`` of
processing time, as at the end of its stream (every pending pair, every open window), and tells
the runtime to drop it (:meth:`~operators.contract.KeyedOperator.gone`). A record that comes
later starts the key afresh.

Silence is measured in processing time because a silent key has no event time of its own: a
clock taken from other keys would make its outputs depend on how keys interleave. Eviction is
therefore part of the idle-timeout exception to "a function of the data alone"
(docs/operators.md). As with the idle timers, a timer found due later than ``slack`` past its
time means the job was not running (a stop, a backlog): it is armed again, so a restart does not
drop every key whose records are still on their way.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any, ClassVar, Generic, TypeVar

from operators.codec import Reader, Writer, snapshot_kind
from operators.contract import KeyedOperator, due
from operators.records import Records
from operators.time import NO_TIME, to_ms

O = TypeVar("O")  # noqa: E741


@dataclass
class Kept:
    """The inner operator's state, when the key last had records, and whether it was dropped."""

    inner: Any
    #: processing time of the key's last batch with records, or of the re-arm of its timer
    since_ms: int = NO_TIME
    gone: bool = False


class Retention(KeyedOperator[Kept, O], Generic[O]):
    """``inner`` whose keys are finished and dropped after ``retention`` of processing time
    without a record; a timer more than ``slack`` late is re-armed instead."""

    kind: ClassVar[str] = "retention"

    def __init__(
        self, inner: KeyedOperator[Any, O], retention: timedelta, slack: timedelta
    ) -> None:
        self.inner, self.retention, self.slack = inner, retention, slack
        self.retention_ms = to_ms(retention, what="state retention")
        self.slack_ms = to_ms(slack, what="state retention's slack", allow_zero=True)

    def for_key(self, key: str) -> Retention[O]:
        inner = self.inner.for_key(key)
        return self if inner is self.inner else Retention(inner, self.retention, self.slack)

    def initial(self) -> Kept:
        return Kept(self.inner.initial())

    def process(self, state: Kept, batch: Records, now_ms: int) -> tuple[Kept, O]:
        state.inner, out = self.inner.process(state.inner, batch, now_ms)
        state.since_ms = now_ms
        return state, out

    def expiry(self, state: Kept) -> int | None:
        """Processing time at which the key is dropped if it stays silent."""
        return None if state.since_ms == NO_TIME else state.since_ms + self.retention_ms

    def deadline(self, state: Kept) -> int | None:
        times = [t for t in (self.inner.deadline(state.inner), self.expiry(state)) if t is not None]
        return min(times, default=None)

    def on_timer(self, state: Kept, now_ms: int) -> tuple[Kept, O | None]:
        expiry = self.expiry(state)
        if expiry is not None and due(expiry, now_ms):
            if now_ms - expiry <= self.slack_ms:
                state.inner, owed = self.inner.finish(state.inner)
                state.gone = True
                return state, owed
            state.since_ms = now_ms  # the job was not running: the key had no chance to speak
        if due(self.inner.deadline(state.inner), now_ms):
            state.inner, fired = self.inner.on_timer(state.inner, now_ms)
            return state, fired
        return state, None

    def finish(self, state: Kept) -> tuple[Kept, O]:
        state.inner, out = self.inner.finish(state.inner)
        return state, out

    def gone(self, state: Kept) -> bool:
        return state.gone

    def write(self, state: Kept, out: Writer) -> None:
        out.int64(state.since_ms)
        out.blob(self.inner.snapshot(state.inner))

    def read(self, data: Reader) -> Kept:
        since_ms = data.int64()
        return Kept(self.inner.restore(data.blob()), since_ms)

    def restore(self, data: bytes | bytearray | memoryview | None) -> Kept:
        """Also a snapshot of ``inner`` alone (a checkpoint written before the retention
        existed): its key is timed from its next record."""
        if data is not None and len(data) and snapshot_kind(data) == self.inner.kind:
            return Kept(self.inner.restore(data))
        return super().restore(data)
