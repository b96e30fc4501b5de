"""The keyed-states table runs each key exactly as the Spark adapter runs it alone, whatever the
keys' interleaving, the batch cuts and where the whole table went through bytes."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators import KeyedOperator, Records, drive
from operators.keyed import KeyedStates
from tests.support.plain import plain

from .scenarios import NOW_MS, thing_operator

record = st.tuples(
    st.sampled_from(["k1", "k2", "k3"]),
    st.sampled_from(["speed", "torque", "temp"]),
    st.integers(0, 60),
    st.one_of(st.integers(-3, 3).map(float), st.sampled_from([math.nan])),
    st.sampled_from(["a", "b"]),
)
batches = st.lists(st.tuples(st.integers(0, 10), st.integers(0, 1500)), min_size=1, max_size=10)


def per_key(rows: list[tuple]) -> dict[str, Records]:
    keys = sorted({r[0] for r in rows})
    return {k: Records.of(*zip(*[r[1:] for r in rows if r[0] == k], strict=True)) for k in keys}


def alone(operator: KeyedOperator, rows: list[tuple], cuts: list) -> dict[str, list]:
    """Each key driven by itself as the adapter drives it: called in a batch that holds its
    records, or when its timer is due."""
    out: dict[str, list] = {}
    given = rows[: sum(size for size, _ in cuts)]
    for key in sorted({r[0] for r in given}):
        state, at, now, seen = operator.initial(), 0, NOW_MS, False
        for size, step in cuts:
            now += step
            mine = [r[1:] for r in rows[at : at + size] if r[0] == key]
            at += size
            seen = seen or bool(mine)
            if seen:
                batch = Records.of(*zip(*mine, strict=True)) if mine else None
                driven = drive(operator, state, batch, now)
                state = driven.state
                out.setdefault(key, []).extend(plain(emitted) for _, emitted in driven.emitted)
        out.setdefault(key, []).append(operator.snapshot(state))
    return out


def in_a_table(operator: KeyedOperator, rows: list[tuple], cuts: list, restarts: set) -> dict:
    table, out, at, now = KeyedStates(operator), {}, 0, NOW_MS  # type: ignore[var-annotated]
    for k, (size, step) in enumerate(cuts):
        if k in restarts:
            snapshot, table = table.snapshot(), KeyedStates(operator)
            table.restore(snapshot)
        now += step
        batch = rows[at : at + size]
        at += size
        done = table.step(per_key(batch).items(), now)
        assert done.changed or not batch, "a batch with records changes state"
        for key, _, emitted in done.emitted:
            out.setdefault(key, []).append(plain(emitted))
    for key, state in table.states.items():
        out.setdefault(key, []).append(operator.snapshot(state))
    return out


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@settings(max_examples=80, deadline=None)
@given(st.lists(record, max_size=60), batches, st.sets(st.integers(0, 10), max_size=3))
def test_a_table_of_keys_runs_each_key_as_it_runs_alone(
    rows: list[tuple], cuts: list, restarts: set[int]
) -> None:
    operator = thing_operator()
    assert in_a_table(operator, rows, cuts, restarts) == alone(operator, rows, cuts)


def test_the_snapshot_is_a_function_of_the_states_and_refuses_other_bytes() -> None:
    operator = thing_operator()
    first, second = KeyedStates(operator), KeyedStates(operator)
    batch = Records.of(["speed", "torque"], [1, 2], [1.0, 2.0], ["a", "b"])
    first.step([("k2", batch), ("k1", batch)], NOW_MS)
    second.step([("k1", batch)], NOW_MS)
    second.step([("k2", batch)], NOW_MS)
    assert first.snapshot() == second.snapshot()
    restored = KeyedStates(operator)
    restored.restore(first.snapshot())
    assert restored.snapshot() == first.snapshot() and len(restored) == 2
    assert set(restored.deadlines) == {"k1", "k2"}  # the windows' idle timers come back too
    with pytest.raises(Exception, match="state"):
        restored.restore(operator.snapshot(operator.initial()))
    empty = KeyedStates(operator)
    empty.restore(None)
    assert len(empty) == 0 and not empty.step([], NOW_MS).changed
    assert np.all([len(r) == 0 for _, r, _ in empty.step([], NOW_MS + 10**9).emitted])
