"""The keyed-operator contract: one algorithm, one key at a time, its state a value.

An operator holds only its configuration; the caller keeps one state per key and hands it in
with each call, so the same operator runs in a dict of keys (tests, offline), in Spark's state
store (``spark_jobs.stateful``) or nested in another operator (:mod:`operators.compose`). For
one key it:

* :meth:`~KeyedOperator.process` - takes a batch of the key's records in arrival order and
  emits what the batch made certain (joined pairs, final windows, records handed back);
* :meth:`~KeyedOperator.on_timer` - fires the processing-time timer it asked for with
  :meth:`~KeyedOperator.deadline` (the windows' idle flush); operators without timers never
  ask;
* :meth:`~KeyedOperator.for_key` - the operator bound to one key, for operators whose
  configuration differs per key (the operation statistics' ratings); the others are their own;
* :meth:`~KeyedOperator.gone` - says the key's state is to be dropped (it owes nothing; a later
  record starts the key afresh: :mod:`operators.retention`);
* :meth:`~KeyedOperator.finish` - moves the watermark to ``END_TIME``: the stream ended,
  everything pending is certain;
* :meth:`~KeyedOperator.snapshot` / :meth:`~KeyedOperator.restore` - the state as bytes in the
  one versioned encoding (:mod:`operators.codec`) and back.

:func:`drive` is the one order of those calls for one key and batch; every runtime (the dict of
keys, Spark's state store) and the contract's test go through it, so they agree by construction.
An operator may mutate the state it is handed and return it: a state handed to a call whose
batch then fails to commit is spent, and the caller restores the last committed snapshot.

Outputs are functions of the records and of the processing times handed in, never of how the
records were cut into batches or where a snapshot was taken: restore(snapshot(s)) continues
exactly as s would have.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar, Generic, TypeVar

from operators.codec import Reader, Writer
from operators.records import Records

S = TypeVar("S")
O = TypeVar("O")  # noqa: E741


class KeyedOperator(ABC, Generic[S, O]):
    #: Names the state in its snapshot, so one operator's bytes are never read as another's.
    kind: ClassVar[str]

    def for_key(self, key: str) -> KeyedOperator[S, O]:
        """The operator as it runs for ``key``: itself, unless its configuration depends on
        the key (master data per thing, e.g. a drive's rating). Callers bind it before every
        other call for that key."""
        return self

    @abstractmethod
    def initial(self) -> S:
        """The state of a key never seen."""

    @abstractmethod
    def process(self, state: S, batch: Records, now_ms: int) -> tuple[S, O]:
        """The key's records of one batch, in arrival order; ``now_ms`` is the batch's
        processing time (for rules against a bad clock and for timers)."""

    def deadline(self, state: S) -> int | None:
        """Processing time at which :meth:`on_timer` wants to be called; None: no timer."""
        return None

    def on_timer(self, state: S, now_ms: int) -> tuple[S, O | None]:
        """The timer of :meth:`deadline` is due (``now_ms`` >= it)."""
        return state, None

    def gone(self, state: S) -> bool:
        """Whether the runtime drops the key's state now: it emitted everything it owed."""
        return False

    @abstractmethod
    def finish(self, state: S) -> tuple[S, O]:
        """End of stream: everything pending is emitted."""

    @abstractmethod
    def write(self, state: S, out: Writer) -> None:
        """The state's fields, in the order :meth:`read` reads them."""

    @abstractmethod
    def read(self, data: Reader) -> S:
        """A state from the fields :meth:`write` wrote (any version up to the current one)."""

    def snapshot(self, state: S) -> bytes:
        out = Writer(self.kind)
        self.write(state, out)
        return out.finish()

    def restore(self, data: bytes | bytearray | memoryview | None) -> S:
        """The state a snapshot holds; None or empty bytes: a key never seen."""
        if data is None or len(data) == 0:
            return self.initial()
        reader = Reader(data, self.kind)
        state = self.read(reader)
        reader.done()
        return state


def due(deadline: int | None, now_ms: int) -> bool:
    """Whether a timer at ``deadline`` fires at ``now_ms``."""
    return deadline is not None and deadline <= now_ms


@dataclass(frozen=True)
class Driven(Generic[S, O]):
    """One key's call of :func:`drive`: its new state, what it emitted with the records each
    output came from (none for a timer's), the processing time its timer is next due, and
    whether the key is to be dropped (then there is no state to keep and no timer)."""

    state: S
    emitted: list[tuple[Records, O]]
    deadline: int | None
    gone: bool = False


def drive(operator: KeyedOperator[S, O], state: S, batch: Records | None, now_ms: int) -> Driven:
    """One key at processing time ``now_ms``: its records of the batch (None: it has none, it
    was called for its timer), then its timer if due. ``operator`` is already bound to the key
    (:meth:`KeyedOperator.for_key`)."""
    emitted: list[tuple[Records, O]] = []
    if batch is not None:
        state, output = operator.process(state, batch, now_ms)
        emitted.append((batch, output))
    if due(operator.deadline(state), now_ms):
        state, fired = operator.on_timer(state, now_ms)
        if fired is not None:
            emitted.append((Records.empty(), fired))
    if operator.gone(state):
        return Driven(state, emitted, None, gone=True)
    return Driven(state, emitted, operator.deadline(state))
