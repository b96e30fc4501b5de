"""The windows library against the brute-force oracle: the same windows and the same set-aside
records for any batch cuts, partition interleavings and skew, restart points and idle flushes."""

from __future__ import annotations

import math
import os
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from operators import NO_TIME, ms
from streamkit.durations import parse_duration_ms
from tests.oracles.windows import Record, Spec, starts_containing, window_oracle
from windowing import (
    WindowRules,
    WindowSpec,
    WindowState,
    flush,
    from_bytes,
    parse_windows,
    process,
    to_bytes,
)

EXAMPLES = int(os.environ.get("PROPERTY_EXAMPLES", "150"))
NOW_MS = 1_000_000


def test_durations_and_specs() -> None:
    assert [parse_duration_ms(t) for t in ("500ms", "10s", "10", "1m", "2h", "1.5s")] == [
        500,
        10_000,
        10_000,
        60_000,
        7_200_000,
        1500,
    ]
    assert [parse_duration_ms(t, allow_zero=True) for t in ("0", "off", "0s", "2s")] == [
        0,
        0,
        0,
        2000,
    ]
    for bad in ("", "ten", "-1s", "0s", "0.5ms"):
        with pytest.raises(ValueError):
            parse_duration_ms(bad)
    assert parse_windows("10s", "60s/10s", "30s") == [
        WindowSpec("tumbling", ms(10_000), ms(10_000)),
        WindowSpec("sliding", ms(60_000), ms(10_000)),
        WindowSpec("session", ms(30_000), ms(30_000)),
    ]
    assert parse_windows("off", "1m/30s")[0].label == "sliding-60000-30000"
    assert parse_windows("off", "", "5s")[0].label == "session-5000"
    for tumbling, sliding in (("off", ""), ("10s", "60s"), ("10s", "10s/60s")):
        with pytest.raises(ValueError):
            parse_windows(tumbling, sliding)


@pytest.mark.parametrize(
    "size,slide", [(10_000, 10_000), (60_000, 20_000), (50_000, 20_000), (1000, 1000)]
)
def test_every_window_containing_a_time_and_no_other(size: int, slide: int) -> None:
    times = np.array([0, 1, 9_999, 10_000, 59_999, 1_554_096_380_468, -1, -25_000], dtype=np.int64)
    rows, starts = WindowSpec("sliding", ms(size), ms(slide)).starts(times)
    got = sorted(zip(rows.tolist(), starts.tolist(), strict=False))
    want = sorted(
        (i, s) for i, t in enumerate(times.tolist()) for s in starts_containing(t, size, slide)
    )
    assert got == want


RULES = WindowRules(
    (WindowSpec("tumbling", ms(10), ms(10)), WindowSpec("session", ms(5), ms(5))),
    allowed_lateness=ms(5),
)


def run_key(rules: WindowRules, batches: list[list[tuple[int, float, str]]]) -> tuple[list, list]:
    state, windows, aside = WindowState(), [], []
    for batch in batches:
        step = process(
            rules,
            state,
            np.array([t for t, _, _ in batch], np.int64),
            np.array([v for _, v, _ in batch]),
            [r for _, _, r in batch],
            NOW_MS,
        )
        windows += [(w.spec.label, w.start_ms, w.end_ms, w.count) for w in step.windows]
        aside += [(batch[a.index][0], a.reason, a.horizon_ms) for a in step.aside]
        state = step.state
    return windows, aside


def test_lateness_is_judged_against_the_key_clock_and_the_allowed_lateness() -> None:
    windows, aside = run_key(
        RULES,
        [
            [(0, 1.0, "a"), (12, 2.0, "b"), (7, 3.0, "c"), (6, 4.0, "d")],
            [(12, 2.0, "b"), (30, 5.0, "e")],
        ],
    )
    # 7 = 12 - 5 is on time, 6 is behind; the re-sent (12, b) is a duplicate; 30 closes [0,10)
    # and [10,20)
    assert aside == [(6, "behind_watermark", 7), (12, "duplicate", 7)]
    assert ("tumbling-10", 0, 10, 2) in windows and ("tumbling-10", 10, 20, 1) in windows
    # sessions 0 | 7 | 12: a gap of 5 or more ends a session; all three closed by 30 - 5 >= 12 + 5
    assert {w for w in windows if w[0] == "session-5"} == {
        ("session-5", 0, 0, 1),
        ("session-5", 7, 7, 1),
        ("session-5", 12, 12, 1),
    }
    assert not [w for w in windows if w[1] == 30]  # the window of 30 is still open


def test_a_far_future_record_moves_no_clock() -> None:
    rules = WindowRules(RULES.specs, ms(5), max_future=ms(1000))
    windows, aside = run_key(rules, [[(0, 1.0, "a"), (NOW_MS + 1001, 9.0, "x"), (3, 2.0, "b")]])
    assert aside == [(NOW_MS + 1001, "future_timestamp", -5)]  # compared with 0 - 5
    assert windows == []  # nothing closed: the clock is still 3
    windows, aside = run_key(rules, [[(0, 1.0, "a"), (NOW_MS + 1000, 9.0, "x"), (3, 2.0, "b")]])
    assert aside == [
        (3, "behind_watermark", NOW_MS + 995)
    ]  # at the bound: an ordinary (very new) record


def test_the_last_copy_of_a_record_wins_while_its_windows_are_open() -> None:
    rules = WindowRules((WindowSpec("tumbling", ms(10), ms(10)),), ms(5))
    first = process(rules, WindowState(), np.array([1, 2]), np.array([1.0, 2.0]), ["a", "b"])
    # a changed copy of 2 (another row id) and one of 1 (same id, another value), in the next batch
    step = process(
        rules,
        first.state,
        np.array([2, 1, 2, 2]),
        np.array([5.0, 7.0, 5.0, 2.0]),
        ["c", "a", "c", "b"],
    )
    assert [(s.time_ms, s.value, s.row_id) for s in step.superseded] == [
        (2, 2.0, "b"),
        (1, 1.0, "a"),
        (2, 5.0, "c"),
    ]
    assert [(a.index, a.reason) for a in step.aside] == [
        (2, "duplicate")
    ]  # (2, 5.0, c) again: identical
    (window,) = process(rules, step.state, np.array([20]), np.array([0.0]), ["z"]).windows
    assert (window.count, window.min, window.max) == (
        2,
        2.0,
        7.0,
    )  # 1 -> 7.0 and 2 -> 2.0 (b is back)
    late = process(
        rules,
        process(rules, step.state, np.array([20]), np.array([0.0]), ["z"]).state,
        np.array([2]),
        np.array([9.0]),
        ["d"],
    )
    assert [a.reason for a in late.aside] == [
        "behind_watermark"
    ] and not late.superseded  # its window is out
    joined = WindowRules(
        rules.specs, ms(5), same_by_row_id=True
    )  # pairs share event times: (time, id) is the record
    both = process(
        joined, WindowState(), np.array([3, 3, 3]), np.array([1.0, 2.0, 4.0]), ["p", "q", "p"]
    )
    assert [(s.row_id, s.value) for s in both.superseded] == [
        ("p", 1.0)
    ] and both.state.row_ids == ["p", "q"]


def test_an_idle_flush_closes_every_open_window_and_what_follows_in_them_is_window_closed() -> None:
    state = process(
        RULES, WindowState(), np.array([1, 4, 11]), np.array([1.0, 2.0, 3.0]), ["a", "b", "c"]
    ).state
    step = flush(RULES, state)
    assert sorted((w.spec.label, w.start_ms, w.count) for w in step.windows) == [
        ("session-5", 1, 2),
        ("session-5", 11, 1),
        ("tumbling-10", 0, 2),
        ("tumbling-10", 10, 1),
    ]
    assert not step.state.has_open_windows and step.state.horizon_ms == 20  # end of [10, 20)
    after = process(
        RULES, step.state, np.array([12, 3, 20]), np.array([4.0, 5.0, 6.0]), ["d", "e", "f"]
    )
    assert [(a.index, a.reason) for a in after.aside] == [
        (0, "window_closed"),
        (1, "behind_watermark"),
    ]
    assert flush(RULES, WindowState()).windows == []


def test_a_window_closes_at_the_clock_of_the_record_that_made_it_closable() -> None:
    """Each window gets the clock at the record whose horizon first reached its closing time, not
    the clock at the end of its batch: the same in one batch as in one batch per record. What an
    idle flush closes has no such record: None."""
    rules = WindowRules(
        (WindowSpec("tumbling", ms(10), ms(10)), WindowSpec("session", ms(5), ms(5))),
        allowed_lateness=ms(5),
    )
    times = [1, 16, 12, 27, 40]  # horizons -4, 11, 11, 22, 35
    want = {
        ("tumbling-10", 0): 16,
        ("tumbling-10", 10): 27,
        ("tumbling-10", 20): 40,  # closing at 10, 20, 30
        ("session-5", 1): 16,
        ("session-5", 12): 27,
        ("session-5", 27): 40,
    }  # at 6, 21, 32
    for cut in (len(times), 1, 2, 3):
        state, closed = WindowState(), dict[tuple[str, int], int | None]()
        for first in range(0, len(times), cut):
            batch = times[first : first + cut]
            step = process(
                rules, state, np.array(batch), np.zeros(len(batch)), [f"r{t}" for t in batch]
            )
            closed |= {(w.spec.label, w.start_ms): w.closed_at_ms for w in step.windows}
            state = step.state
        assert closed == want, cut
    assert {(w.spec.label, w.start_ms): w.closed_at_ms for w in flush(rules, state).windows} == {
        ("tumbling-10", 40): None,
        ("session-5", 40): None,
    }


def test_statistics_and_state_round_trip() -> None:
    values = [3.0, 1.0, 4.0, 1.5]
    rules = WindowRules((WindowSpec("tumbling", ms(100), ms(100)),), ms(0))
    first = process(
        rules, WindowState(), np.array([1, 2, 3]), np.array(values[:3]), ["a", "b", "c"]
    )
    restored = from_bytes(to_bytes(first.state))
    assert restored.row_ids == ["a", "b", "c"] and restored.times.tolist() == [1, 2, 3]
    (window,) = process(
        rules, restored, np.array([4, 200]), np.array([values[3], 0.0]), ["d", "e"]
    ).windows
    assert (window.count, window.min, window.max) == (4, 1.0, 4.0)
    assert window.stddev is not None and math.isclose(window.mean, 2.375)
    assert math.isclose(window.stddev, float(np.std(values, ddof=1)))


# ------------------------------------------------------------------ the property, with hypothesis
SPECS = [Spec("tumbling", 10, 10), Spec("sliding", 20, 5), Spec("session", 7, 7)]
LIB_RULES = WindowRules(
    tuple(WindowSpec(s.kind, ms(s.size_ms), ms(s.slide_ms)) for s in SPECS),
    ms(8),
    max_future=ms(500),
)


@st.composite
def key_streams(draw: st.DrawFn) -> list[list[Record]]:
    """Per partition, its records in arrival order: keys interleaved, disorder, re-sends,
    conflicting rows at one time, far-future clocks, some keys much denser than others."""
    keys = [
        (f"T{i}", q)
        for i in range(draw(st.integers(1, 3)))
        for q in ("a", "b")[: draw(st.integers(1, 2))]
    ]
    partitions: list[list[Record]] = [[], []]
    for n, (thing, quantity) in enumerate(keys):
        t, out = 0, list[Record]()
        for i in range(draw(st.integers(0, 40))):
            kind = draw(
                st.sampled_from(["next"] * 6 + ["back", "resend", "conflict", "future", "jump"])
            )
            if kind == "resend" and out:
                out.append(draw(st.sampled_from(out)))
                continue
            if kind == "back":
                time_ms = t - draw(st.integers(0, 20))
            elif kind == "future":
                time_ms = NOW_MS + 501 + draw(st.integers(0, 10**6))
            else:
                t += draw(st.integers(0, 30 if kind == "jump" else 4))
                time_ms = t
            row_id = f"r{i}" if kind != "conflict" or not out else f"c{i}"
            if kind == "conflict" and out:
                time_ms = out[-1][2]
            out.append((thing, quantity, time_ms, float(draw(st.integers(-50, 50))) / 4, row_id))
        target = partitions[(n + int(thing[1:])) % 2]
        merged: list[Record] = []
        while target or out:  # a random interleaving with what the partition holds already
            take = draw(st.booleans()) if target and out else bool(out)
            merged.append(out.pop(0) if take else target.pop(0))
        target.extend(merged)
    return partitions


def run_batches(
    partitions: list[list[Record]],
    cuts: list[tuple[int, int]],
    restarts: set[int],
    flushes: set[int],
    rules: WindowRules = LIB_RULES,
    late: Counter | None = None,
) -> tuple[dict, dict, list, Counter]:
    """The job's shape without Spark: each batch takes some records of each partition, groups by
    key in arrival order, and carries the states (through their bytes at a restart). ``late``
    collects the late topic's records as the job writes them (watermark None for "none")."""
    states: dict[tuple, WindowState] = {}
    positions: dict[tuple, int] = {}
    windows: dict[tuple, dict] = {}
    aside: dict[tuple, str] = {}
    superseded: Counter = Counter()
    flushed: list[tuple[str, str, int]] = []
    offsets = [0, 0]
    batch_no = 0
    while offsets[0] < len(partitions[0]) or offsets[1] < len(partitions[1]):
        take = cuts[batch_no % len(cuts)] if cuts else (1, 1)
        batch: dict[tuple, list[Record]] = {}
        for p in (0, 1):
            chunk = partitions[p][offsets[p] : offsets[p] + max(take[p], 1)]
            offsets[p] += len(chunk)
            for record in chunk:
                batch.setdefault(record[:2], []).append(record)
        for key, records in batch.items():
            step = process(
                rules,
                states.get(key, WindowState()),
                np.array([r[2] for r in records], np.int64),
                np.array([r[3] for r in records]),
                [r[4] for r in records],
                NOW_MS,
            )
            collect(step, key, records, positions.get(key, 0), windows, aside)
            superseded.update((*key, s.time_ms, s.row_id, s.value) for s in step.superseded)
            if late is not None:
                late.update(late_records(step, key, records))
            positions[key] = positions.get(key, 0) + len(records)
            states[key] = step.state
        if batch_no in flushes:
            for key, state in states.items():
                if state.has_open_windows:
                    flushed_step = flush(rules, state)
                    collect(flushed_step, key, [], 0, windows, aside)
                    states[key] = flushed_step.state
                    flushed.append((*key, positions[key]))
        if batch_no in restarts:
            states = {key: from_bytes(to_bytes(state)) for key, state in states.items()}
        batch_no += 1
    return windows, aside, flushed, superseded


def collect(step, key: tuple, records: list[Record], base: int, windows: dict, aside: dict) -> None:
    for w in step.windows:
        window_key = (*key, w.spec.label, w.start_ms)
        assert window_key not in windows, f"window emitted twice: {window_key}"
        windows[window_key] = {
            "window_start_ms": w.start_ms,
            "window_end_ms": w.end_ms,
            "count": w.count,
            "mean": w.mean,
            "min": w.min,
            "max": w.max,
            "stddev": w.stddev,
            "closed_at_ms": w.closed_at_ms,
        }
    for a in step.aside:
        r = records[a.index]
        aside[(r[0], r[1], r[2], r[4], base + a.index + 1)] = a.reason


def late_records(step, key: tuple, records: list[Record]) -> list[tuple]:
    """The step's records for the late topic: (thing, quantity, time, value, row id, reason,
    watermark)."""

    def watermark(horizon_ms: int) -> int | None:
        return None if horizon_ms == NO_TIME else horizon_ms

    return [
        (
            *key,
            records[a.index][2],
            records[a.index][3],
            records[a.index][4],
            a.reason,
            watermark(a.horizon_ms),
        )
        for a in step.aside
    ] + [
        (*key, s.time_ms, s.value, s.row_id, "superseded", watermark(s.horizon_ms))
        for s in step.superseded
    ]


def oracle_late(expected) -> Counter:
    return Counter(
        (
            r["thing"],
            r["quantity"],
            r["event_time_ms"],
            r["value"],
            r["row_id"],
            r["reason"],
            r["watermark_ms"],
        )
        for r in expected.late_records
    )


def assert_matches_oracle(windows: dict, expected: dict) -> None:
    assert windows.keys() == expected.keys(), (
        sorted(set(expected) - set(windows))[:3],
        sorted(set(windows) - set(expected))[:3],
    )
    for key, want in expected.items():
        got = windows[key]
        for name in ("window_start_ms", "window_end_ms", "count", "min", "max", "closed_at_ms"):
            assert got[name] == want[name], (key, name, got[name], want[name])
        assert math.isclose(got["mean"], want["mean"], rel_tol=1e-12, abs_tol=1e-12), key
        assert (got["stddev"] is None) == (want["stddev"] is None), key
        if want["stddev"] is not None:
            assert math.isclose(got["stddev"], want["stddev"], rel_tol=1e-9, abs_tol=1e-12), key


cut_lists = st.lists(st.tuples(st.integers(0, 12), st.integers(0, 12)), min_size=1, max_size=6)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    key_streams(),
    cut_lists,
    cut_lists,
    st.sets(st.integers(0, 30)),
    st.sets(st.integers(0, 30), max_size=3),
    st.booleans(),
)
def test_same_output_for_any_processing(
    partitions, cuts, other_cuts, restarts, flushes, by_row_id
) -> None:
    """Any batch cuts, skew between partitions, restart points: the oracle's windows, bit for
    bit the same floats; with idle flushes: the oracle's windows for those flush points."""
    rules = replace(LIB_RULES, same_by_row_id=by_row_id)
    arrival = partitions[0] + partitions[1]  # the oracle needs only each key's order
    late: Counter = Counter()
    windows, aside, _, superseded = run_batches(partitions, cuts, restarts, set(), rules, late)
    expected = window_oracle(
        arrival,
        SPECS,
        rules.allowed_lateness_ms,
        now_ms=NOW_MS,
        max_future_ms=500,
        same_by_row_id=by_row_id,
    )
    assert_matches_oracle(windows, expected.windows)
    assert aside == expected.aside and superseded == expected.superseded
    assert late == oracle_late(
        expected
    )  # every field of the late topic's records, watermark included
    again, aside_again, _, superseded_again = run_batches(
        partitions, other_cuts, set(), set(), rules
    )
    assert (
        again == windows and aside_again == aside and superseded_again == superseded
    )  # bit-identical

    flushed_windows, flushed_aside, flushed, flushed_superseded = run_batches(
        partitions, cuts, restarts, flushes, rules
    )
    expected = window_oracle(
        arrival,
        SPECS,
        rules.allowed_lateness_ms,
        flush_after=flushed,
        now_ms=NOW_MS,
        max_future_ms=500,
        same_by_row_id=by_row_id,
    )
    assert_matches_oracle(flushed_windows, expected.windows)
    assert flushed_aside == expected.aside and flushed_superseded == expected.superseded


def closed_at_of(windows: dict[tuple, dict]) -> dict[tuple, int | None]:
    return {key: w["closed_at_ms"] for key, w in windows.items()}


ONE_BATCH, ONE_RECORD_EACH = [(10**6, 10**6)], [(1, 1)]


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key_streams(), cut_lists, st.sets(st.integers(0, 30)), st.booleans())
def test_closed_at_is_the_same_whatever_the_batch_cuts(
    partitions, cuts, restarts, by_row_id
) -> None:
    """The record that made a window closable is a fact of the data: any cuts and restarts give
    the clocks of one batch per record, and of all records in one batch."""
    rules = replace(LIB_RULES, same_by_row_id=by_row_id)
    closed = closed_at_of(run_batches(partitions, cuts, restarts, set(), rules)[0])
    assert closed == closed_at_of(run_batches(partitions, ONE_RECORD_EACH, set(), set(), rules)[0])
    assert closed == closed_at_of(run_batches(partitions, ONE_BATCH, set(), set(), rules)[0])
    assert None not in closed.values()  # no idle flush: every window was closed by a record


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key_streams(), cut_lists, st.sets(st.integers(0, 30), max_size=3))
def test_closed_at_is_the_oracles_record_that_made_the_window_closable(
    partitions, cuts, flushes
) -> None:
    """Against the oracle's own walk (with idle flushes: None for what they closed), and what it
    means: an accepted event time of the key at least the allowed lateness past the closing time."""
    windows, _, flushed, _ = run_batches(partitions, cuts, set(), flushes)
    expected = window_oracle(
        partitions[0] + partitions[1],
        SPECS,
        LIB_RULES.allowed_lateness_ms,
        flush_after=flushed,
        now_ms=NOW_MS,
        max_future_ms=500,
    )
    assert closed_at_of(windows) == closed_at_of(expected.windows)
    accepted = {(r[0], r[1], r[2]) for p in partitions for r in p if r[2] <= NOW_MS + 500}
    specs = {s.label: s for s in SPECS}
    for (thing, quantity, label, _), w in windows.items():
        if w["closed_at_ms"] is not None:
            closes = w["window_end_ms"] + (
                specs[label].size_ms if specs[label].kind == "session" else 0
            )
            assert (thing, quantity, w["closed_at_ms"]) in accepted
            assert w["closed_at_ms"] - LIB_RULES.allowed_lateness_ms >= closes


def compacted(partition: list[Record]) -> list[Record]:
    """What Kafka's log compaction leaves of a partition keyed thing|quantity|ms: the last
    record of each key, in offset order."""
    last = {(r[0], r[1], r[2]): offset for offset, r in enumerate(partition)}
    return [r for offset, r in enumerate(partition) if last[(r[0], r[1], r[2])] == offset]


@st.composite
def streams_with_prompt_copies(draw: st.DrawFn) -> list[list[Record]]:
    """Per partition, keys in event-time order with re-sends and changed copies of records no
    more than the allowed lateness behind the key's clock (the bound of docs/windows.md)."""
    partitions: list[list[Record]] = [[], []]
    for n in range(draw(st.integers(1, 4))):
        thing, t, out = f"T{n}", 0, list[Record]()
        for i in range(draw(st.integers(1, 40))):
            recent = [r for r in out if r[2] >= t - LIB_RULES.allowed_lateness_ms]
            kind = draw(st.sampled_from(["next"] * 4 + ["resend", "change"]))
            if kind != "next" and recent:
                copy = draw(st.sampled_from(recent))
                changed = kind == "change"
                out.append(
                    (
                        *copy[:3],
                        copy[3] + 1 if changed else copy[3],
                        f"c{i}" if changed else copy[4],
                    )
                )
                continue
            t += draw(st.integers(1, 6))
            out.append((thing, "q", t, float(draw(st.integers(-50, 50))), f"r{i}"))
        target = partitions[n % 2]
        merged: list[Record] = []
        while target or out:
            take = draw(st.booleans()) if target and out else bool(out)
            merged.append(out.pop(0) if take else target.pop(0))
        target.extend(merged)
    return partitions


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams_with_prompt_copies(), cut_lists, cut_lists)
def test_a_rerun_after_compaction_gives_the_same_windows(partitions, cuts, other_cuts) -> None:
    """Copies within the allowed lateness: the first run (which sees every copy) and a rerun
    from scratch over what compaction left give the same windows: the last copy counted in both.
    Not the same ``closed_at_ms``: compaction removes records, and the one that made a window
    closable may be among them (an earlier copy of a record), so only the contents are compared."""
    windows, aside, _, _ = run_batches(partitions, cuts, set(), set())
    assert set(aside.values()) <= {"duplicate"}
    rerun, rerun_aside, _, rerun_superseded = run_batches(
        [compacted(p) for p in partitions], other_cuts, set(), set()
    )
    assert contents(rerun) == contents(windows) and not rerun_aside and not rerun_superseded


def contents(windows: dict[tuple, dict]) -> dict[tuple, dict]:
    """The windows without when they became closable."""
    return {
        key: {name: x for name, x in w.items() if name != "closed_at_ms"}
        for key, w in windows.items()
    }
