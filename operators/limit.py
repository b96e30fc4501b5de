"""A bound on the quantities a key keeps state for: a name past it is refused, never state.

A machine that sends a new quantity name in every message (a firmware bug, hostile input) would
otherwise grow its key's state without limit: every name gets windows, a join pair, a
component. :class:`QuantityLimit` admits a key's names in the order their first record
arrives, up to ``limit``; every record of a name beyond it is handed back as
``quantity_limit`` and reaches no part of the inner operator. Admission follows the key's
records in arrival order, so which names are refused is a function of the data alone, whatever
the batch cuts and restart points.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from operators.codec import Reader, Writer, snapshot_kind
from operators.compose import Emitted
from operators.contract import KeyedOperator
from operators.records import Records

#: The part name under which the refused records are emitted.
STAGE = "quantities"


@dataclass
class LimitState:
    """The names admitted so far, and the inner operator's state."""

    inner: Any
    admitted: set[str] = field(default_factory=set)


class QuantityLimit(KeyedOperator[LimitState, Emitted]):
    """``inner`` (an operator emitting :data:`~operators.compose.Emitted`, e.g. ``Together``)
    behind an admission of at most ``limit`` quantity names per key; 0: no limit (nothing is
    tracked). Refused records are emitted first, as ``(STAGE, records, records)``."""

    kind: ClassVar[str] = "quantity-limit"

    def __init__(self, inner: KeyedOperator[Any, Emitted], limit: int) -> None:
        if limit < 0:
            raise ValueError(f"a quantity limit is 0 (none) or positive, not {limit}")
        self.inner = inner
        self.limit = limit

    def for_key(self, key: str) -> QuantityLimit:
        inner = self.inner.for_key(key)
        return self if inner is self.inner else QuantityLimit(inner, self.limit)

    def initial(self) -> LimitState:
        return LimitState(self.inner.initial())

    def admit(self, state: LimitState, batch: Records) -> np.ndarray | None:
        """Which of the batch's records belong to admitted names (a mask; None: all of them),
        admitting new names in the order of their first record while there is room."""
        if not self.limit:
            return None
        admitted = state.admitted
        names = batch.quantity.tolist()
        new = [name for name in dict.fromkeys(names) if name not in admitted]
        if not new:
            return None
        for name in new:
            if len(admitted) < self.limit:
                admitted.add(name)
        refused = {name for name in new if name not in admitted}
        if not refused:
            return None
        return np.fromiter((name not in refused for name in names), dtype=bool, count=len(names))

    def process(self, state: LimitState, batch: Records, now_ms: int) -> tuple[LimitState, Emitted]:
        kept = self.admit(state, batch)
        emitted: Emitted = []
        if kept is not None:
            refused = batch.take(~kept)
            emitted.append((STAGE, refused, refused))
            batch = batch.take(kept)
        if len(batch):
            state.inner, inner = self.inner.process(state.inner, batch, now_ms)
            emitted.extend(inner)
        return state, emitted

    def deadline(self, state: LimitState) -> int | None:
        return self.inner.deadline(state.inner)

    def on_timer(self, state: LimitState, now_ms: int) -> tuple[LimitState, Emitted | None]:
        state.inner, fired = self.inner.on_timer(state.inner, now_ms)
        return state, fired

    def finish(self, state: LimitState) -> tuple[LimitState, Emitted]:
        state.inner, emitted = self.inner.finish(state.inner)
        return state, emitted

    def write(self, state: LimitState, out: Writer) -> None:
        out.texts(sorted(state.admitted))
        out.blob(self.inner.snapshot(state.inner))

    def read(self, data: Reader) -> LimitState:
        admitted = set(data.texts())
        return LimitState(self.inner.restore(data.blob()), admitted)

    def restore(self, data: bytes | bytearray | memoryview | None) -> LimitState:
        """Also a snapshot of ``inner`` alone (a checkpoint written before the limit existed):
        its names are admitted as their records come again."""
        if data is not None and len(data) and snapshot_kind(data) == self.inner.kind:
            return LimitState(self.inner.restore(data))
        return super().restore(data)
