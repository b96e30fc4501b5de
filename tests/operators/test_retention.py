"""A silent key dropped after its retention, against an oracle of the rule: a call without
records found at or after the key's last records' call plus the retention, and no more than the
slack after it, ends the key's stream there (everything it owed is emitted, as at its end) and
drops it; later records start it afresh; a call found later than the slack re-arms the wait.
Whatever the batch cuts, processing times and restart points."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators import NO_TIME, QuantityLimit, Records, Retention, drive, ms
from operators.keyed import KeyedStates
from spark_jobs.stateful import OperatorFunction
from tests.support.group_state import FakeGroupState
from tests.support.plain import plain

from .scenarios import NOW_MS, thing_operator

record = st.tuples(
    st.sampled_from(["speed", "torque", "temp", "hum"]),
    st.integers(0, 60),
    st.one_of(st.integers(-3, 3).map(float), st.sampled_from([math.nan])),
    st.sampled_from(["a", "b"]),
)
#: per call: how many records, how far the processing clock moved (some calls are silent long
#: enough for the retention, some come later than its slack)
calls = st.lists(st.tuples(st.integers(0, 6), st.integers(0, 4000)), min_size=1, max_size=14)


def drops_by_rule(calls: list[tuple[bool, int]], retention: int, slack: int) -> list[int]:
    """The specification: the indices of the calls at which the key is dropped."""
    since: int | None = None
    drops = []
    for k, (has_records, now) in enumerate(calls):
        if has_records:
            since = now
        elif since is not None and now >= since + retention:
            if now - (since + retention) <= slack:
                drops.append(k)
                since = None
            else:
                since = now
    return drops


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@settings(max_examples=150, deadline=None)
@given(
    st.lists(record, max_size=50),
    calls,
    st.integers(1, 5000),
    st.integers(0, 3000),
    st.sets(st.integers(0, 14), max_size=4),
)
def test_a_silent_key_emits_what_it_owes_and_is_dropped_as_the_rule_says(
    raw: list[tuple], cuts: list, retention: int, slack: int, restarts: set[int]
) -> None:
    records = Records.of(*zip(*raw, strict=False)) if raw else Records.empty()
    kept, inner = Retention(thing_operator(), ms(retention), ms(slack)), thing_operator()
    state, alone = kept.initial(), inner.initial()
    batches, times, at, now = [], [], 0, NOW_MS
    for size, step in cuts:
        now += step
        batches.append(records.take(slice(at, at + size)))
        times.append(now)
        at += len(batches[-1])
    drops = drops_by_rule(
        [(len(b) > 0, t) for b, t in zip(batches, times, strict=True)], retention, slack
    )
    since = NO_TIME
    for k, (batch, now) in enumerate(zip(batches, times, strict=True)):
        if k in restarts:
            state = kept.restore(kept.snapshot(state))
        driven = drive(kept, state, batch if len(batch) else None, now)
        got = [plain(out) for _, out in driven.emitted]
        if k in drops:  # the reference: the stream ends here, a new one starts after it
            alone, owed = inner.finish(alone)
            want, alone, since = [plain(owed)], inner.initial(), NO_TIME
            assert driven.gone and driven.deadline is None
            state = kept.initial()  # as the runtime does: nothing kept
        else:
            expected = drive(inner, alone, batch if len(batch) else None, now)
            alone, want = expected.state, [plain(out) for _, out in expected.emitted]
            since = now if len(batch) else since
            if since != NO_TIME and now >= since + retention:  # found late: re-armed
                since = now
            expiry = None if since == NO_TIME else since + retention
            deadlines = [d for d in (expected.deadline, expiry) if d is not None]
            assert not driven.gone and driven.deadline == min(deadlines, default=None)
            state = driven.state
        assert got == want, k
    assert plain(kept.finish(state)[1]) == plain(inner.finish(alone)[1])


def test_a_retired_thing_leaves_the_table_and_a_renamed_one_starts_afresh() -> None:
    """Two things: one stops for good, one keeps sending; after the retention only the second
    is held (the first having emitted what the same table without a retention would emit at
    its end), and the first's records coming back start it as a new key."""
    operator = Retention(QuantityLimit(thing_operator(), 10), ms(5000), ms(2000))
    table, reference = KeyedStates(operator), KeyedStates(QuantityLimit(thing_operator(), 10))
    one = Records.of(["speed", "torque"], [1, 2], [1.0, 2.0], ["s1", "t2"])
    for each in (table, reference):
        each.step([("old", one), ("kept", one)], NOW_MS)
    for second in range(1, 6):
        later = Records.of(["speed"], [10 * second], [1.0], [f"s{second}"])
        step = table.step([("kept", later)], NOW_MS + 1000 * second)
        expected = reference.step([("kept", later)], NOW_MS + 1000 * second)
        if second < 5:
            assert len(table) == 2 and plain(step.emitted) == plain(expected.emitted)
    assert len(table) == 1 and "old" not in table.states and "old" not in table.deadlines
    owed = [plain(out) for key, _, out in step.emitted if key == "old"]
    assert owed == [plain(reference.operator.finish(reference.states["old"])[1])]
    table.step([("old", one)], NOW_MS + 6000)
    assert plain(table.states["old"].inner) == plain(fed(one))


def fed(records: Records) -> object:
    """The limited thing operator's state after ``records`` alone."""
    operator = QuantityLimit(thing_operator(), 10)
    return operator.process(operator.initial(), records, NOW_MS + 6000)[0]


def test_spark_removes_a_dropped_key_from_its_store() -> None:
    """The adapter Spark calls: a key's timed-out call past its retention removes its state
    and sets no timer."""
    operator = Retention(thing_operator(), ms(5000), ms(2000))
    function = OperatorFunction(
        operator, lambda out, key, records, emitted, extra: None, [], timers=True
    )
    frame = pd.DataFrame(
        {
            "thing": ["m1"],
            "quantity": ["speed"],
            "event_time_ms": [1],
            "value": [1.0],
            "row_id": ["s1"],
            "kafka_partition": [0],
            "kafka_offset": [0],
        }
    )
    state = FakeGroupState(None, NOW_MS)
    list(function(("m1",), [frame], state))
    assert state.exists and state.deadline_ms == NOW_MS + 1000  # the windows' idle flush
    flushed = FakeGroupState(state.get, NOW_MS + 1000, timed_out=True)
    list(function(("m1",), [], flushed))
    assert flushed.exists and flushed.deadline_ms == NOW_MS + 5000
    timed_out = FakeGroupState(flushed.get, NOW_MS + 5000, timed_out=True)
    list(function(("m1",), [], timed_out))
    assert not timed_out.exists and timed_out.deadline_ms == 0
