"""The contract's promise, for the join, the windows and the single pass's composition of the
two: a state taken to bytes and back at any point goes on exactly as the state that was never
interrupted, whatever the batch cuts, the processing times and the timers that fire."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators import KeyedOperator, QuantityLimit, Records, Retention, drive, ms
from tests.support.plain import plain

from .scenarios import NOW_MS, join_operator, opstats_operator, thing_operator, window_operator

OPERATORS: dict[str, Callable[[], KeyedOperator[Any, Any]]] = {
    "join": join_operator,
    "join with its idle flush": lambda: join_operator(idle_ms=1000),
    "windows": window_operator,
    "thing": thing_operator,
    "thing behind a limit of names": lambda: QuantityLimit(thing_operator(), 3),
    "opstats": opstats_operator,
    "thing dropped after a silence": lambda: Retention(
        QuantityLimit(thing_operator(), 3), ms(2500), ms(1000)
    ),
}

record = st.tuples(
    st.sampled_from(["speed", "torque", "temp", "speed_C1", "torque_C1", "torque_C2"]),
    st.integers(0, 60),
    st.one_of(st.integers(-3, 3).map(float), st.sampled_from([math.nan, math.inf])),
    st.sampled_from(["a", "b", "c"]),
)
#: per batch: how many records, how far the processing clock moved (the windows' idle timeout is
#: 1 s, so some batches find timers due; a batch of no records is a call for the timers alone)
batches = st.lists(st.tuples(st.integers(0, 8), st.integers(0, 1500)), min_size=1, max_size=12)


def run(operator: KeyedOperator, records: Records, cuts: list, restarts: set[int]) -> list:
    """Every output, as the runtimes drive an operator (:func:`operators.drive`): the batch,
    then the timer if due; at the end of the stream everything pending. Before the batches in
    ``restarts`` the state goes through bytes."""
    out: list = []
    state, at, now = operator.initial(), 0, NOW_MS
    for k, (size, step) in enumerate(cuts):
        if k in restarts:
            state = operator.restore(operator.snapshot(state))
        now += step
        batch = records.take(slice(at, at + size))
        at += size
        driven = drive(operator, state, batch if len(batch) else None, now)
        state = operator.initial() if driven.gone else driven.state  # a runtime drops it
        out.extend(plain(emitted) for _, emitted in driven.emitted)
        out.append((driven.deadline, driven.gone))
    if len(cuts) in restarts:
        state = operator.restore(operator.snapshot(state))
    state, emitted = operator.finish(state)
    out.append(plain(emitted))
    return [*out, operator.snapshot(state)]


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # inf in windows
@pytest.mark.parametrize("name", sorted(OPERATORS))
@settings(max_examples=80, deadline=None)
@given(st.lists(record, max_size=60), batches, st.sets(st.integers(0, 12), min_size=1, max_size=4))
def test_snapshot_restore_continue_equals_an_uninterrupted_run(
    name: str, raw: list[tuple], cuts: list, restarts: set[int]
) -> None:
    operator = OPERATORS[name]()
    records = Records.of(*zip(*raw, strict=False)) if raw else Records.empty()
    assert run(operator, records, cuts, restarts) == run(operator, records, cuts, set())


@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_a_key_never_seen_restores_from_nothing(name: str) -> None:
    operator = OPERATORS[name]()
    for nothing in (None, b"", bytearray()):
        assert plain(operator.restore(nothing)) == plain(operator.initial())
