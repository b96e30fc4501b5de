"""One keyed operator over many keys in one process: the states held in a dict.

Spark's stateful API calls a Python function per key and batch through a worker, Arrow and
pandas; holding every key's state in one process instead lets a batch be split by key with
numpy and each key's records go straight to the operator. :meth:`snapshot` /
:meth:`restore` give the whole table as bytes in the one state encoding. Operators update
their states in place, so the table after a :meth:`KeyedStates.step` whose batch then failed
to commit is not to be trusted: the caller restores the last committed snapshot.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from operators.codec import Reader, Writer
from operators.contract import KeyedOperator, drive, due
from operators.records import Records

#: The table's kind in its snapshot: never read as one key's state.
KIND = "keyed-states"


@dataclass(frozen=True)
class Step:
    """What one batch did: per key that ran, its records (empty for a timer alone) and what
    the operator emitted, in key order; ``changed`` says whether any state may have moved."""

    emitted: list[tuple[str, Records, Any]]
    changed: bool


class KeyedStates:
    """Every key's state of ``operator``; keys are strings (the single pass: the thing)."""

    def __init__(self, operator: KeyedOperator) -> None:
        self.operator = operator
        self.states: dict[str, Any] = {}
        #: keys with a timer, and when it is due (kept so a batch need not ask every key)
        self.deadlines: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.states)

    def step(self, batches: Iterable[tuple[str, Records]], now_ms: int) -> Step:
        """The batch's records per key (each key once, records in arrival order), then every
        timer due at ``now_ms``, each key through :func:`~operators.contract.drive`: a key
        with records fires its due timer after them; a key without records only when its
        timer is due; a key the operator calls gone is dropped. Keys run in sorted order, so the
        emitted list is a function of the batch alone."""
        states, deadlines = self.states, self.deadlines
        emitted: list[tuple[str, Records, Any]] = []
        given = dict(batches)
        due_keys = {key for key, at in deadlines.items() if due(at, now_ms)}
        for key in sorted(given.keys() | due_keys):
            operator = self.operator.for_key(key)
            current = states[key] if key in states else operator.initial()
            driven = drive(operator, current, given.get(key), now_ms)
            emitted.extend((key, records, output) for records, output in driven.emitted)
            if driven.gone:
                states.pop(key, None)
                deadlines.pop(key, None)
                continue
            states[key] = driven.state
            if driven.deadline is None:
                deadlines.pop(key, None)
            else:
                deadlines[key] = driven.deadline
        return Step(emitted, bool(given or due_keys))

    def snapshot(self) -> bytes:
        """Every key's state, keys sorted, as bytes of the one state encoding."""
        out = Writer(KIND)
        out.count(len(self.states))
        for key in sorted(self.states):
            out.text(key)
            out.blob(self.operator.snapshot(self.states[key]))
        return out.finish()

    def restore(self, data: bytes | None) -> None:
        """The table a :meth:`snapshot` holds (None: no key seen yet)."""
        states: dict[str, Any] = {}
        if data:
            reader = Reader(data, KIND)
            for _ in range(reader.count()):
                key = reader.text()
                states[key] = self.operator.restore(reader.blob())
            reader.done()
        self.states = states
        self.deadlines = {
            key: at
            for key, at in ((key, self.operator.deadline(s)) for key, s in states.items())
            if at is not None
        }
