"""Late records, the reorder stage (allowed disorder) and the partner timeout."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lsb import JoinConfig, JoinState, process_batch
from operators import ms
from tests.lsb.per_record import flush_state, process_record
from tests.oracles.join import certain_pairs, oracle_pairs

from .helpers import (
    LSB_SETTINGS,
    cuts_for,
    interleaving,
    opt_ms,
    run_batches,
    run_records,
    stream_times,
)


def accepted_times(events, late, key, q):
    """Input times of a stream minus those whose every occurrence was handed back."""
    seen = Counter(t for k, qq, t, _ in events if k == key and qq == q)
    gone = Counter(t for k, qq, t, _ in late if k == key and qq == q)
    return sorted(t for t, n in seen.items() if n > gone[t])


@st.composite
def disordered_stream(draw, q: str, max_len: int = 60):
    """A stream in a locally shuffled arrival order, with some repeated timestamps."""
    times = draw(stream_times(max_len))
    arrival = list(times)
    for _ in range(draw(st.integers(0, len(arrival)))):
        i = draw(st.integers(0, len(arrival) - 1))
        j = min(len(arrival) - 1, i + draw(st.integers(1, 4)))
        arrival[i], arrival[j] = arrival[j], arrival[i]
    for _ in range(draw(st.integers(0, 3))):
        arrival.insert(draw(st.integers(0, len(arrival))), draw(st.sampled_from(times)))
    return [("m", q, t, float(t)) for t in arrival]


# --- default late policy ---------------------------------------------------------


def test_late_record_is_handed_back_not_joined():
    cfg = JoinConfig.single("l", "r")
    st_ = JoinState.empty(cfg)
    for q, t in [("l", 10), ("r", 10), ("l", 20)]:
        process_record(cfg, "m", st_, q, t, 1.0)
    late = process_record(cfg, "m", st_, "l", 15, 7.0, index=3)
    assert late.pairs == []
    assert [(x.quantity, x.time, x.value, x.reason, x.index) for x in late.late] == [
        ("l", 15, 7.0, "behind_watermark", 3)
    ]
    dup = process_record(cfg, "m", st_, "r", 10, 1.0)
    assert [x.reason for x in dup.late] == ["behind_watermark"]
    pairs = {(p.left_time, p.right_time) for p in flush_state(cfg, "m", st_).pairs}
    assert (15, 10) not in pairs and (20, 10) in pairs


def test_invalid_values_are_reported():
    cfg = JoinConfig.single("l", "r")
    res = process_batch(
        cfg,
        None,
        np.array(["l", "r", "x", "l"]),
        np.array([1, 2, 3, 4]),
        np.array([np.nan, 1.0, 1.0, np.inf]),
    )
    assert res.late.reason_names() == ["invalid_value", "invalid_value"]
    assert res.late.index.tolist() == [0, 3]
    assert res.skipped == 1


@LSB_SETTINGS
@given(disordered_stream("l"), disordered_stream("r"), st.data())
def test_default_policy_joins_exactly_the_accepted_records(ls, rs, data):
    cfg = JoinConfig.single("l", "r")
    events = data.draw(interleaving([ls, rs]))
    a = run_records(cfg, events)
    b = run_batches(cfg, events, cuts_for(data.draw, len(events)))
    assert sorted(a.late) == sorted(b.late)
    # Late = not newer than the stream's running maximum, in the stream's own arrival order.
    for stream in (ls, rs):
        top, want = None, []
        for k, q, t, _ in stream:
            if top is not None and t <= top:
                want.append((k, q, t, "behind_watermark"))
            else:
                top = t
        assert sorted(x for x in a.late if x[1] == stream[0][1]) == sorted(want)
    expect = oracle_pairs(
        accepted_times(events, a.late, "m", "l"), accepted_times(events, a.late, "m", "r")
    )
    assert a.pair_set() == b.pair_set() == {("m", "l~r", x, y) for x, y in expect}
    assert not a.duplicates() and not b.duplicates()


# --- reorder stage -------------------------------------------------------------


def test_allowed_disorder_rescues_mildly_out_of_order_records():
    strict = JoinConfig.single("l", "r")
    tolerant = JoinConfig.single("l", "r", allowed_disorder=ms(5))
    events = [("m", "l", t, 1.0) for t in [0, 3, 2, 6, 4, 10, 1]] + [
        ("m", "r", t, 1.0) for t in [1, 5, 9]
    ]
    s = run_records(strict, events)
    d = run_records(tolerant, events)
    assert sorted(x[2] for x in s.late) == [1, 2, 4]
    assert [x[2:] for x in d.late] == [
        (1, "behind_watermark")
    ]  # 1 is more than 5 ms behind 10 when it comes
    assert d.pair_set() == {
        ("m", "l~r", a, b) for a, b in oracle_pairs([0, 2, 3, 4, 6, 10], [1, 5, 9])
    }
    assert run_batches(tolerant, events, {4}).pair_set() == d.pair_set()


def test_reorder_stage_reports_duplicates_and_holds_records_until_its_watermark():
    cfg = JoinConfig.single("l", "r", allowed_disorder=ms(10))
    st_ = JoinState.empty(cfg)
    assert process_record(cfg, "m", st_, "r", 0, 1.0).pairs == []
    assert process_record(cfg, "m", st_, "l", 0, 1.0).pairs == []  # held: nothing released yet
    assert [x.reason for x in process_record(cfg, "m", st_, "l", 0, 1.0).late] == ["duplicate"]
    process_record(cfg, "m", st_, "r", 10, 1.0)  # releases r0
    out = process_record(cfg, "m", st_, "l", 10, 1.0)  # releases l0 -> tie pair with r0
    assert [(p.left_time, p.right_time) for p in out.pairs] == [(0, 0)]


def test_in_the_reorder_stage_the_last_copy_of_a_record_wins_in_both_paths():
    """Last wins, as in compaction: a changed copy replaces the held one (handed back as
    superseded, with its value); once released, a copy is late and the released one stands."""
    cfg = JoinConfig.single("l", "r", allowed_disorder=ms(10))
    events = [
        ("m", "r", 0, 1.0),
        ("m", "l", 0, 1.0),
        ("m", "l", 0, 5.0),
        ("m", "l", 0, 5.0),
        ("m", "l", 0, 7.0),
        ("m", "r", 10, 2.0),
        ("m", "l", 10, 3.0),
        ("m", "l", 0, 9.0),
    ]
    late = [(x.time, x.value, x.reason) for x in _record_late(cfg, events)]
    assert late == [
        (0, 1.0, "superseded"),
        (0, 5.0, "duplicate"),
        (0, 5.0, "superseded"),
        (0, 9.0, "behind_watermark"),
    ]
    for cuts in (set(), {2}, {3, 5}, {1, 4, 7}):
        assert sorted(run_batches(cfg, events, cuts).late) == sorted(
            ("m", "l", t, reason) for t, _, reason in late
        )
    pairs = _record_pairs(cfg, events)
    assert (0, 7.0, 0) in {
        (p.left_time, p.left_value, p.right_time) for p in pairs
    }  # the last copy joined
    assert all(p.left_value == 7.0 for p in pairs if p.left_time == 0)


def _record_late(cfg, events):
    state = JoinState.empty(cfg)
    return [x for e in events for x in process_record(cfg, e[0], state, e[1], e[2], e[3]).late]


def _record_pairs(cfg, events):
    state = JoinState.empty(cfg)
    pairs = [p for e in events for p in process_record(cfg, e[0], state, e[1], e[2], e[3]).pairs]
    return pairs + flush_state(cfg, "m", state).pairs


@LSB_SETTINGS
@given(disordered_stream("l"), disordered_stream("r"), st.sampled_from([1, 2, 5]), st.data())
def test_reorder_stage_same_in_both_paths(ls, rs, disorder, data):
    cfg = JoinConfig.single("l", "r", allowed_disorder=ms(disorder))
    events = data.draw(interleaving([ls, rs]))
    a = run_records(cfg, events)
    b = run_batches(cfg, events, cuts_for(data.draw, len(events)))
    assert sorted(a.late) == sorted(b.late)
    assert a.snapshots == b.snapshots
    expect = oracle_pairs(
        accepted_times(events, a.late, "m", "l"), accepted_times(events, a.late, "m", "r")
    )
    assert a.pair_set() == b.pair_set() == {("m", "l~r", x, y) for x, y in expect}
    assert not a.duplicates() and not b.duplicates()
    # With enough tolerance nothing but repeated timestamps is late.
    if disorder >= 5:
        assert {x[3] for x in a.late} <= {"duplicate", "behind_watermark"}


# --- partner timeout -------------------------------------------------------------


def test_partner_timeout_emits_prev_pairs_of_a_silent_partner_and_drops_its_stragglers():
    events = (
        [("m", "r", 0, 2.0)]
        + [("m", "l", t, 1.0) for t in range(0, 10)]
        + [("m", "r", 2, 5.0), ("m", "r", 12, 3.0)]
    )
    plain = JoinConfig.single("l", "r")
    timed = JoinConfig.single("l", "r", partner_timeout=ms(3))
    for cfg, want_while_silent in ((plain, {(0, 0)}), (timed, {(t, 0) for t in range(0, 7)})):
        st_ = JoinState.empty(cfg)
        got = set()
        for _, q, t, v in events[:11]:
            got |= {
                (p.left_time, p.right_time) for p in process_record(cfg, "m", st_, q, t, v).pairs
            }
        # l9 moved r's watermark to 9 - 3 = 6: prev(l0..l6) = r0 is now certain.
        assert got == want_while_silent
        straggler = process_record(cfg, "m", st_, "r", 2, 5.0)
        if cfg is timed:
            assert [(x.quantity, x.time, x.reason) for x in straggler.late] == [
                ("r", 2, "partner_timeout")
            ]
            assert straggler.pairs == []
        else:
            assert straggler.late == []  # without a timeout r2 is simply joined
            assert {(p.left_time, p.right_time) for p in straggler.pairs} == {
                (1, 0),
                (1, 2),
                (2, 2),
            }
    res = run_records(timed, events)
    assert res.pair_set() == {("m", "l~r", a, b) for a, b in oracle_pairs(list(range(10)), [0, 12])}


@LSB_SETTINGS
@given(
    disordered_stream("l", 40), disordered_stream("r", 40), st.sampled_from([0, 1, 3, 8]), st.data()
)
def test_partner_timeout_matches_its_definition_in_both_paths(ls, rs, timeout, data):
    cfg = JoinConfig.single("l", "r", partner_timeout=opt_ms(timeout))
    events = data.draw(interleaving([ls, rs]))
    a = run_records(cfg, events)
    b = run_batches(cfg, events, cuts_for(data.draw, len(events)))
    # Reference: own-stream check first, then "at or behind partner's last - timeout".
    last = {"l": None, "r": None}
    want = []
    for k, q, t, _ in events:
        partner = "r" if q == "l" else "l"
        if last[q] is not None and t <= last[q]:
            want.append((k, q, t, "behind_watermark"))
            continue
        last[q] = t
        if last[partner] is not None and t <= last[partner] - timeout:
            want.append((k, q, t, "partner_timeout"))
    assert sorted(a.late) == sorted(b.late) == sorted(want)
    assert a.snapshots == b.snapshots
    expect = oracle_pairs(
        accepted_times(events, a.late, "m", "l"), accepted_times(events, a.late, "m", "r")
    )
    assert a.pair_set() == b.pair_set() == {("m", "l~r", x, y) for x, y in expect}
    assert not a.duplicates() and not b.duplicates()


def test_silent_partner_records_wait_for_their_next_even_with_timeout():
    cfg = JoinConfig.single("l", "r", partner_timeout=ms(5))
    st_ = JoinState.empty(cfg)
    process_record(cfg, "m", st_, "r", 0, 1.0)
    for t in range(1, 1000):
        process_record(cfg, "m", st_, "l", t, 1.0)
    # Every l record still waits for its next r (that is a pair of the definition), so
    # the buffer grows; what the timeout bounds is the *latency* of the prev pairs.
    assert len(st_.pairs[0].left) == 999
    assert len(st_.pairs[0].right) == 1


@pytest.mark.parametrize("bad", [-1])
def test_config_rejects_negative_settings(bad):
    with pytest.raises(ValueError):
        JoinConfig.single("l", "r", max_gap=ms(bad))
    with pytest.raises(ValueError):
        JoinConfig.single("l", "r", allowed_disorder=ms(bad))
    with pytest.raises(ValueError):
        JoinConfig.single("l", "r", partner_timeout=ms(bad))
    with pytest.raises(ValueError):
        JoinConfig.single("l", "l")


@LSB_SETTINGS
@given(
    disordered_stream("l", 30),
    disordered_stream("r", 30),
    disordered_stream("c", 30),
    st.sampled_from([0, 2]),
    st.sampled_from([None, 0, 3]),
    st.sampled_from([None, 2]),
    st.data(),
)
def test_all_policies_together_same_in_both_paths(ls, rs, cs, disorder, timeout, gap, data):
    """Reorder + timeout + gap, three pairs sharing quantities: identical pairs, late records and
    state."""
    from lsb import PairSpec

    cfg = JoinConfig(
        pairs=(PairSpec("l", "r"), PairSpec("r", "c"), PairSpec("c", "l")),
        max_gap=opt_ms(gap),
        allowed_disorder=ms(disorder),
        partner_timeout=opt_ms(timeout),
    )
    events = data.draw(interleaving([ls, rs, cs]))
    a = run_records(cfg, events)
    b = run_batches(cfg, events, cuts_for(data.draw, len(events)))
    assert sorted(a.late) == sorted(b.late)
    assert a.snapshots == b.snapshots
    assert sorted(a.pairs) == sorted(b.pairs)
    assert not a.duplicates()


@LSB_SETTINGS
@given(
    stream_times(30),
    stream_times(30),
    st.sampled_from([None, 1, 4]),
    st.sampled_from([None, 0, 2]),
    st.data(),
)
def test_timeout_and_gap_emit_exactly_when_certain_with_bounded_buffers(
    left, right, timeout, gap, data
):
    """After every record: emitted == pairs certain under the side watermarks, gap-filtered."""
    cfg = JoinConfig.single("l", "r", partner_timeout=opt_ms(timeout), max_gap=opt_ms(gap))
    events = data.draw(
        interleaving([[("m", "l", t, 0.0) for t in left], [("m", "r", t, 0.0) for t in right]])
    )
    state = JoinState.empty(cfg)
    emitted: set[tuple[int, int]] = set()
    accepted: dict[str, list[int]] = {"l": [], "r": []}
    seen_last = {"l": -1, "r": -1}  # newest time of each stream, late or not (times are >= 0)
    for _, q, t, v in events:
        step = process_record(cfg, "m", state, q, t, v)
        for p in step.pairs:
            assert (p.left_time, p.right_time) not in emitted
            emitted.add((p.left_time, p.right_time))
        if not step.late:
            accepted[q].append(t)
        seen_last[q] = t

        def watermark(side: str, partner: str) -> int:
            own = accepted[side][-1] if accepted[side] else -1
            return own if timeout is None else max(own, seen_last[partner] - timeout)

        want = certain_pairs(accepted["l"], accepted["r"], watermark("l", "r"), watermark("r", "l"))
        if gap is not None:
            want = {(a, b) for a, b in want if abs(a - b) <= gap}
        assert emitted == want
    if timeout is not None and gap is not None:
        # With both set, a silent partner no longer makes the buffer grow: a head record
        # whose future partners would all be beyond the gap is gone.
        ps = state.pairs[0]
        for own, other, own_name in ((ps.left, ps.right, "l"), (ps.right, ps.left, "r")):
            if len(own) > 1 and other.times:
                w_other = max(other.last, seen_last[own_name] - timeout)
                head_evictable = own.times[1] <= w_other and (
                    own.times[0] <= other.last or own.times[0] + gap < w_other
                )
                assert not head_evictable
    rest = flush_state(cfg, "m", state).pairs
    final = emitted | {(p.left_time, p.right_time) for p in rest}
    assert final == oracle_pairs(accepted["l"], accepted["r"], gap)


def test_silent_partner_with_timeout_and_gap_keeps_memory_bounded():
    cfg = JoinConfig.single("l", "r", partner_timeout=ms(5), max_gap=ms(3))
    st_ = JoinState.empty(cfg)
    process_record(cfg, "m", st_, "r", 0, 1.0)
    for t in range(1, 1000):
        process_record(cfg, "m", st_, "l", t, 1.0)
    assert len(st_.pairs[0].left) <= 10
    res = process_batch(cfg, None, np.array(["r"] + ["l"] * 999), np.arange(1000), np.ones(1000))
    assert len(res.state.pairs[0].left) <= 10
