"""The limit of a key's quantity names against an oracle of its rule: the first ``limit`` names
in arrival order are admitted, every record of any other name is refused and reaches no state;
whatever the batch cuts, processing times and restart points."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators import QuantityLimit, Records, drive
from operators.limit import STAGE
from tests.support.plain import plain

from .make_golden import GOLDEN
from .scenarios import NOW_MS, thing_operator

NAMES = ["speed", "torque", "temp", "speed_C1", "torque_C1", "hum", "p1", "p2"]
record = st.tuples(
    st.sampled_from(NAMES),
    st.integers(0, 60),
    st.one_of(st.integers(-3, 3).map(float), st.sampled_from([math.nan])),
    st.sampled_from(["a", "b"]),
)
batches = st.lists(st.tuples(st.integers(0, 8), st.integers(0, 1500)), min_size=1, max_size=12)


def admitted_by_rule(names: list[str], limit: int) -> set[str]:
    """The specification: the first ``limit`` distinct names in arrival order (0: all)."""
    first: list[str] = []
    for name in names:
        if name not in first:
            first.append(name)
    return set(first if limit == 0 else first[:limit])


def as_tuples(records: Records) -> list[tuple]:
    return [
        (str(q), int(t), float(v).hex(), str(r))
        for q, t, v, r in zip(
            records.quantity, records.event_time_ms, records.value, records.row_id, strict=True
        )
    ]


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@settings(max_examples=150, deadline=None)
@given(
    st.lists(record, max_size=60),
    batches,
    st.integers(0, 5),
    st.sets(st.integers(0, 12), max_size=4),
)
def test_the_first_names_are_admitted_and_the_rest_refused_as_the_rule_says(
    raw: list[tuple], cuts: list, limit: int, restarts: set[int]
) -> None:
    records = Records.of(*zip(*raw, strict=False)) if raw else Records.empty()
    admitted = admitted_by_rule([r[0] for r in raw], limit)
    limited, inner = QuantityLimit(thing_operator(), limit), thing_operator()
    state, alone = limited.initial(), inner.initial()
    refused: list[tuple] = []
    at, now = 0, NOW_MS
    for k, (size, step) in enumerate(cuts):
        if k in restarts:
            state = limited.restore(limited.snapshot(state))
        now += step
        batch = records.take(slice(at, at + size))
        at += size
        driven = drive(limited, state, batch if len(batch) else None, now)
        state = driven.state
        outputs = [out for _, emitted in driven.emitted for out in emitted]
        refused += [r for name, _, out in outputs if name == STAGE for r in as_tuples(out)]
        # the inner operator, driven with the admitted records alone, emits exactly the rest
        mine = batch.take(np.array([str(q) in admitted for q in batch.quantity], dtype=bool))
        expected = drive(inner, alone, mine if len(mine) else None, now)
        alone = expected.state
        rest = [out for _, emitted in expected.emitted for out in emitted]
        assert plain([o for o in outputs if o[0] != STAGE]) == plain(rest)
        assert driven.deadline == expected.deadline
        assert set(state.admitted) <= admitted if limit else not state.admitted
    fed = records.take(slice(0, at))
    assert refused == [r for r in as_tuples(fed) if r[0] not in admitted]
    assert plain(limited.finish(state)[1]) == plain(inner.finish(alone)[1])
    assert limited.snapshot(state).endswith(inner.snapshot(alone))


def test_a_name_beyond_the_limit_never_becomes_state() -> None:
    """A thing sending a new name in every record keeps as many names as the limit allows."""
    limited = QuantityLimit(thing_operator(), 3)
    state = limited.initial()
    for t in range(200):
        batch = Records.of([f"q{t}", "temp"], [t, t], [1.0, 2.0], [f"r{t}", f"c{t}"])
        state, emitted = limited.process(state, batch, NOW_MS + t)
    assert sorted(state.admitted) == ["q0", "q1", "temp"]
    windows = state.inner[1]  # the thing's windows per quantity: the admitted names only
    assert sorted(windows) == ["q0", "q1", "temp"]


def test_a_checkpoint_written_before_the_limit_existed_is_read() -> None:
    """The single pass's state of an earlier release is the thing operator's snapshot alone:
    it is restored as it was, and its names are admitted as their records come again."""
    old = (GOLDEN / "thing-v3.bin").read_bytes()
    limited = QuantityLimit(thing_operator(), 2)
    state = limited.restore(old)
    assert plain(state.inner) == plain(thing_operator().restore(old))
    assert state.admitted == set()
    assert limited.restore(limited.snapshot(state)).inner is not None


def test_a_negative_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="quantity limit"):
        QuantityLimit(thing_operator(), -1)
