"""``process`` (numpy classifies the records that meet no other copy of themselves, only the
others are walked) against ``process_reference`` (every record walked in arrival order, the
rule as written): the same Step to the bit, for any batch cuts, copies, equal times, future and
late records, idle flushes and restarts; and the statistics of many windows at once against one
window's formula."""

from __future__ import annotations

import math
import os
import struct
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from operators import ms
from windowing import (
    Step,
    WindowRules,
    WindowSpec,
    WindowState,
    flush,
    from_bytes,
    process,
    process_reference,
    to_bytes,
)
from windowing.classify import classify, classify_each
from windowing.statistics import run_statistics
from windowing.windows import _sorted_records, _take

EXAMPLES = int(os.environ.get("PROPERTY_EXAMPLES", "150"))
NOW_MS = 1_000_000
Record = tuple[int, float, str]


def bits(x: float) -> bytes:
    return struct.pack("<d", x)


def exactly(step: Step) -> tuple:
    """Everything a Step says, with the types of its numbers and the bits of its floats."""
    state = step.state
    return (
        [
            (
                w.spec,
                type(w.start_ms),
                w.start_ms,
                type(w.end_ms),
                w.end_ms,
                type(w.count),
                w.count,
                *(bits(x) for x in (w.mean, w.min, w.max)),
                None if w.stddev is None else bits(w.stddev),
                type(w.closed_at_ms),
                w.closed_at_ms,
            )
            for w in step.windows
        ],
        [(type(a.index), a.index, a.reason, type(a.horizon_ms), a.horizon_ms) for a in step.aside],
        [
            (type(s.time_ms), s.time_ms, bits(s.value), s.row_id, type(s.horizon_ms), s.horizon_ms)
            for s in step.superseded
        ],
        (
            type(state.clock_ms),
            state.clock_ms,
            type(state.horizon_ms),
            state.horizon_ms,
            state.times.dtype,
            state.times.tolist(),
            state.values.dtype,
            [bits(v) for v in state.values.tolist()],
            type(state.row_ids),
            state.row_ids,
        ),
    )


@st.composite
def rules(draw: st.DrawFn) -> WindowRules:
    size = draw(st.integers(1, 25))
    kinds = {
        "tumbling": WindowSpec("tumbling", ms(size), ms(size)),
        "sliding": WindowSpec("sliding", ms(size + draw(st.integers(0, 20))), ms(size)),
        "session": WindowSpec("session", ms(size), ms(size)),
    }
    chosen = draw(st.lists(st.sampled_from(sorted(kinds)), min_size=1, max_size=3, unique=True))
    return WindowRules(
        tuple(kinds[k] for k in chosen),
        allowed_lateness=ms(draw(st.integers(0, 15))),
        max_future=draw(st.sampled_from([None, ms(0), ms(50)])),
        same_by_row_id=draw(st.booleans()),
    )


@st.composite
def records(draw: st.DrawFn) -> list[Record]:
    """One key's records in arrival order: mostly new and in order, some behind, equal times,
    exact re-sends, copies with another value or another row id, far-future clocks."""
    t, out = 0, list[Record]()
    for i in range(draw(st.integers(0, 60))):
        kind = draw(
            st.sampled_from(["next"] * 6 + ["back", "equal", "exact", "value", "row", "future"])
        )
        value = float(draw(st.integers(-40, 40))) / 4
        if kind in ("exact", "value", "row") and out:
            time_ms, old_value, row_id = draw(st.sampled_from(out))
            out.append(
                (
                    time_ms,
                    old_value if kind == "exact" else value,
                    f"c{i}" if kind == "row" else row_id,
                )
            )
            continue
        if kind == "back":
            time_ms = t - draw(st.integers(0, 25))
        elif kind == "future":
            time_ms = NOW_MS + draw(st.integers(1, 100))
        elif kind == "equal":
            time_ms = t
        else:
            t += draw(st.integers(0, 4))
            time_ms = t
        out.append((time_ms, value, f"r{i}"))
    return out


def arrays(batch: list[Record]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    return (
        np.array([r[0] for r in batch], np.int64),
        np.array([r[1] for r in batch], np.float64),
        [r[2] for r in batch],
    )


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rules(),
    records(),
    st.lists(st.integers(1, 25), min_size=1, max_size=5),
    st.sets(st.integers(0, 12)),
    st.sets(st.integers(0, 12), max_size=2),
    st.data(),
)
def test_process_equals_the_record_by_record_reference(
    rules, stream, cuts, restarts, flushes, data
) -> None:
    state, at, batch_no = WindowState(), 0, 0
    while at < len(stream):
        batch = stream[at : at + cuts[batch_no % len(cuts)]]
        at += len(batch)
        now_ms = NOW_MS - data.draw(st.integers(0, 60))
        times, values, row_ids = arrays(batch)
        fast = process(rules, state, times, values, row_ids, now_ms)
        assert exactly(fast) == exactly(
            process_reference(rules, state, times, values, row_ids, now_ms)
        )
        verdicts = classify(
            rules, state, times, values, row_ids, now_ms
        )  # themselves, not only their Step
        reference = classify_each(rules, state, times, values, row_ids, now_ms)
        assert (
            verdicts.counted.tolist(),
            verdicts.aside,
            verdicts.superseded,
            verdicts.dropped,
        ) == (reference.counted.tolist(), reference.aside, reference.superseded, reference.dropped)
        assert verdicts.walked <= reference.walked == len(batch)
        held = list(zip(fast.state.times.tolist(), fast.state.row_ids, strict=False))
        assert held == sorted(
            held
        )  # the state's order, which the windows' statistics are summed in
        state = fast.state
        if batch_no in flushes:
            state = flush(rules, state).state
        if batch_no in restarts:
            state = from_bytes(to_bytes(state))
        batch_no += 1


RULES = WindowRules(
    (
        WindowSpec("tumbling", ms(10), ms(10)),
        WindowSpec("sliding", ms(20), ms(5)),
        WindowSpec("session", ms(7), ms(7)),
    ),
    allowed_lateness=ms(5),
    max_future=ms(100),
)


@pytest.mark.parametrize("by_row_id", [False, True])
def test_only_the_copies_of_a_record_are_walked(by_row_id: bool) -> None:
    rules = replace(RULES, same_by_row_id=by_row_id)
    held = process(
        rules,
        WindowState(),
        np.array([1, 4, 30]),
        np.array([1.0, 2.0, 3.0]),
        ["a", "b", "c"],
        NOW_MS,
    ).state
    assert held.times.tolist() == [30]  # the rest closed: 30 - 5 is past every window of 1 and 4
    # 20 is behind 31 - 5, NOW_MS + 500 from the future: set aside by numpy, with the
    # reference's reasons
    verdicts = classify(
        rules, held, np.array([31, 20, NOW_MS + 500, 27, 32]), np.arange(5.0), list("defgh"), NOW_MS
    )
    assert verdicts.walked == 0 and verdicts.counted.tolist() == [0, 3, 4]
    assert verdicts.aside == [(1, "behind_watermark", 26), (2, "future_timestamp", 26)]
    # a changed copy of 31 in the batch, of 30 held: only those are walked
    verdicts = classify(
        rules, held, np.array([31, 32, 30, 33, 31]), np.arange(5.0), list("dexfd"), NOW_MS
    )
    # (by row id, the held (30, c) and (30, x) are different records)
    assert verdicts.superseded == (
        [(31, 0.0, "d", 28)] if by_row_id else [(30, 3.0, "c", 27), (31, 0.0, "d", 28)]
    )
    assert verdicts.walked == (2 if by_row_id else 3) and verdicts.dropped == (
        [] if by_row_id else [0]
    )
    assert verdicts.counted.tolist() == [1, 2, 3, 4]
    # the same time with other row ids: the same record by time, different records by (time, row id)
    verdicts = classify(
        rules, held, np.array([31, 31, 30]), np.array([1.0, 1.0, 3.0]), ["d", "e", "x"], NOW_MS
    )
    assert verdicts.walked == (0 if by_row_id else 3)
    assert verdicts.counted.tolist() == ([0, 1, 2] if by_row_id else [1, 2])


def one_window(run: np.ndarray) -> tuple[float, float, float, float]:
    """The statistics of one window as its values alone give them."""
    n = len(run)
    mean = float(np.sum(run) / n)
    stddev = float(np.sqrt(np.sum((run - mean) ** 2) / (n - 1))) if n > 1 else math.nan
    return mean, float(run.min()), float(run.max()), stddev


def assert_bulk_equals_one_by_one(values: np.ndarray, counts: list[int]) -> None:
    firsts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    with np.errstate(over="ignore", invalid="ignore"):  # extreme values: inf and NaN, alike in both
        bulk = run_statistics(values, firsts, np.array(counts, np.int64))
        wants = [
            one_window(values[first : first + n])
            for first, n in zip(firsts.tolist(), counts, strict=False)
        ]
    for k, (n, want) in enumerate(zip(counts, wants, strict=False)):
        assert [bits(column[k]) for column in bulk] == [bits(x) for x in want], (k, n)


finite = st.floats(allow_nan=False, allow_infinity=False, width=64)


@settings(max_examples=EXAMPLES, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 300), st.sampled_from([1.0, 1e-3, 1e9]), st.booleans()),
        min_size=1,
        max_size=12,
    ),
    st.integers(0, 2**32 - 1),
    st.lists(finite | st.sampled_from([0.0, -0.0]), max_size=20),
)
def test_statistics_in_bulk_are_the_bits_of_each_window_alone(runs, seed, special) -> None:
    """Runs of random lengths (across numpy's pairwise blocks of 8 and 128), scales, rounded
    readings, signed zeros and extreme values."""
    rng = np.random.default_rng(seed)
    parts = [
        np.round(rng.normal(size=n) * scale, 1) if rounded else rng.normal(size=n) * scale
        for n, scale, rounded in runs
    ]
    counts = [n for n, _, _ in runs]
    if special:
        parts.append(np.array(special))
        counts.append(len(special))
    assert_bulk_equals_one_by_one(np.concatenate(parts), counts)


def test_statistics_of_long_windows_and_many_of_one_size() -> None:
    rng = np.random.default_rng(7)
    counts = [1, 7, 8, 9, 127, 128, 129, 1000, 8191, 8192, 8193, 70_001] + [10] * 5000
    assert_bulk_equals_one_by_one(
        rng.normal(size=sum(counts)) * 1e3, rng.permutation(counts).tolist()
    )


positions = st.lists(st.integers(0, 40), max_size=60).map(lambda p: np.array(p, np.intp))
runs = st.lists(st.tuples(st.integers(0, 35), st.integers(1, 12)), max_size=6).map(
    lambda r: np.array([i for first, n in r for i in range(first, first + n)] or [], np.intp)
)


@settings(max_examples=EXAMPLES, deadline=None)
@given(positions | runs)
def test_take_is_a_list_gather(at: np.ndarray) -> None:
    items = [f"id{i}" for i in range(50)]
    assert _take(items, at) == [items[i] for i in at.tolist()]


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.lists(st.tuples(st.integers(-5, 30), st.sampled_from("abcdefg")), max_size=40))
def test_records_are_sorted_by_time_then_row_id(records: list[tuple[int, str]]) -> None:
    times, row_ids = np.array([t for t, _ in records], np.int64), [r for _, r in records]
    values = np.arange(len(records), dtype=np.float64)  # which record went where
    got = _sorted_records(times, values, row_ids)
    order = sorted(
        range(len(records)), key=lambda i: records[i]
    )  # stable: equal records keep their order
    assert (got[0].tolist(), got[1].tolist(), got[2]) == (
        [records[i][0] for i in order],
        [float(i) for i in order],
        [records[i][1] for i in order],
    )
