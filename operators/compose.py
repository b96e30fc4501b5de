"""Operators built from operators: one per quantity of a key, or several on the same key.

The single pass runs the join and every quantity's windows on a thing's records in one call:
``Together(("join", join, its quantities), ("aggregate", ByQuantity(windows), None))``. Each
part keeps its own state, timer and snapshot, nested in the whole's, so a part behaves exactly
as it does alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np

from operators.codec import Reader, Writer, snapshot_kind
from operators.contract import KeyedOperator, due
from operators.errors import StateFormatError
from operators.records import Records

#: What a composed operator emits: (name of the part or quantity, the records it was given,
#: its output), in the order the parts ran.
Emitted = list[tuple[str, Records, Any]]


def _earliest(deadlines: Sequence[int | None]) -> int | None:
    return min((d for d in deadlines if d is not None), default=None)


class ByQuantity(KeyedOperator[dict[str, Any], Emitted]):
    """``inner`` per quantity of the key's records (quantities in sorted order), each quantity
    with its own state and timer: the key's timer is the earliest of them."""

    kind: ClassVar[str] = "by-quantity"

    def __init__(self, inner: KeyedOperator) -> None:
        self.inner = inner

    def for_key(self, key: str) -> ByQuantity:
        inner = self.inner.for_key(key)
        return self if inner is self.inner else ByQuantity(inner)

    def initial(self) -> dict[str, Any]:
        return {}

    def process(
        self, state: dict[str, Any], batch: Records, now_ms: int
    ) -> tuple[dict[str, Any], Emitted]:
        emitted: Emitted = []
        for quantity, mine in batch.by_quantity():
            held = state[quantity] if quantity in state else self.inner.initial()
            state[quantity], out = self.inner.process(held, mine, now_ms)
            emitted.append((quantity, mine, out))
        return state, emitted

    def deadline(self, state: dict[str, Any]) -> int | None:
        return _earliest([self.inner.deadline(s) for s in state.values()])

    def on_timer(self, state: dict[str, Any], now_ms: int) -> tuple[dict[str, Any], Emitted]:
        emitted: Emitted = []
        for quantity in sorted(q for q, s in state.items() if due(self.inner.deadline(s), now_ms)):
            state[quantity], out = self.inner.on_timer(state[quantity], now_ms)
            if out is not None:
                emitted.append((quantity, Records.empty(), out))
        return state, emitted

    def finish(self, state: dict[str, Any]) -> tuple[dict[str, Any], Emitted]:
        emitted: Emitted = []
        for quantity in sorted(state):
            state[quantity], out = self.inner.finish(state[quantity])
            emitted.append((quantity, Records.empty(), out))
        return state, emitted

    def write(self, state: dict[str, Any], out: Writer) -> None:
        out.count(len(state))
        for quantity in sorted(state):
            out.text(quantity)
            out.blob(self.inner.snapshot(state[quantity]))

    def read(self, data: Reader) -> dict[str, Any]:
        state = {}
        for _ in range(data.count()):
            quantity = data.text()
            state[quantity] = self.inner.restore(data.blob())
        return state


#: Which of a batch's records a part of :class:`Together` takes: its quantities' names, a
#: function of the quantity column giving a mask (names found by pattern), or None: all.
Selection = Sequence[str] | Callable[[np.ndarray], np.ndarray] | None


def _selected(batch: Records, selection: Selection) -> Records:
    if selection is None:
        return batch
    if callable(selection):
        return batch.take(selection(batch.quantity))
    return batch.take(np.isin(batch.quantity, selection))


class Together(KeyedOperator[list[Any], Emitted]):
    """Several operators on the same key, in the order given; each part sees the batch's records
    it selects (:data:`Selection`) and is not called for a batch without any."""

    kind: ClassVar[str] = "together"

    def __init__(self, *parts: tuple[str, KeyedOperator, Selection]) -> None:
        self.parts = [
            (name, operator, q if q is None or callable(q) else list(q))
            for name, operator, q in parts
        ]

    def for_key(self, key: str) -> Together:
        bound = [(name, operator.for_key(key), q) for name, operator, q in self.parts]
        if all(
            b is operator for (_, b, _), (_, operator, _) in zip(bound, self.parts, strict=True)
        ):
            return self
        return Together(*bound)

    def initial(self) -> list[Any]:
        return [operator.initial() for _, operator, _ in self.parts]

    def process(self, state: list[Any], batch: Records, now_ms: int) -> tuple[list[Any], Emitted]:
        emitted: Emitted = []
        for k, (name, operator, quantities) in enumerate(self.parts):
            mine = _selected(batch, quantities)
            if len(mine):
                state[k], out = operator.process(state[k], mine, now_ms)
                emitted.append((name, mine, out))
        return state, emitted

    def deadline(self, state: list[Any]) -> int | None:
        return _earliest(
            [operator.deadline(s) for (_, operator, _), s in zip(self.parts, state, strict=False)]
        )

    def on_timer(self, state: list[Any], now_ms: int) -> tuple[list[Any], Emitted]:
        emitted: Emitted = []
        for k, (name, operator, _) in enumerate(self.parts):
            if due(operator.deadline(state[k]), now_ms):
                state[k], out = operator.on_timer(state[k], now_ms)
                if out is not None:
                    emitted.append((name, Records.empty(), out))
        return state, emitted

    def finish(self, state: list[Any]) -> tuple[list[Any], Emitted]:
        emitted: Emitted = []
        for k, (name, operator, _) in enumerate(self.parts):
            state[k], out = operator.finish(state[k])
            emitted.append((name, Records.empty(), out))
        return state, emitted

    def write(self, state: list[Any], out: Writer) -> None:
        out.count(len(self.parts))
        for (name, operator, _), part in zip(self.parts, state, strict=False):
            out.text(name)
            out.blob(operator.snapshot(part))

    def restore(self, data: bytes | bytearray | memoryview | None) -> list[Any]:
        """As every operator's, and a snapshot of the first part alone restores as that part
        with the others initial: an operator that gained parts beside it (the join job's, once
        the statistics run there) goes on from its checkpoint."""
        first = self.parts[0][1]
        if data is not None and len(data) and snapshot_kind(data) == first.kind != self.kind:
            return [first.restore(data), *(op.initial() for _, op, _ in self.parts[1:])]
        return super().restore(data)

    def read(self, data: Reader) -> list[Any]:
        """The parts' states by name; parts added after the last ones a snapshot holds start
        initial (the single pass's statistics on a checkpoint written without them). A part
        missing or renamed is an error: its state would be lost."""
        names = [name for name, _, _ in self.parts]
        found = [(data.text(), data.blob()) for _ in range(data.count())]
        if [name for name, _ in found] != names[: len(found)] or not found:
            raise StateFormatError(
                f"a state of the parts {[n for n, _ in found]} where {names} were expected"
            )
        return [
            operator.restore(found[k][1]) if k < len(found) else operator.initial()
            for k, (_, operator, _) in enumerate(self.parts)
        ]
