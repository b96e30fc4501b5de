"""Property tests against the brute-force oracle: order, batch cuts and state round trips don't
matter."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from lsb import JoinConfig, JoinState, PairSpec, process_batch, to_bytes
from lsb.results import product
from tests.lsb.per_record import process_record
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

KEYS = ["R0815", "H31415", "R27182"]


@st.composite
def scenario(draw, max_len: int = 200, max_keys: int = 3):
    """Random streams for 1-3 keys, one random interleaving of all of them, batch cuts, max gap."""
    keys = KEYS[: draw(st.integers(1, max_keys))]
    streams, truth = [], {}
    for k in keys:
        left, right = draw(stream_times(max_len)), draw(stream_times(max_len))
        truth[k] = (left, right)
        streams.append([(k, "speed", t, float(t) + 0.5) for t in left])
        streams.append([(k, "torque", t, -float(t)) for t in right])
    events = draw(interleaving(streams))
    gap = draw(st.sampled_from([None, None, 0, 1, 3]))
    return truth, events, cuts_for(draw, len(events)), gap


def expected(truth, gap):
    return {
        (k, "speed~torque", a, b)
        for k, (lt, rt) in truth.items()
        for a, b in oracle_pairs(lt, rt, gap)
    }


@LSB_SETTINGS
@given(scenario())
def test_record_path_equals_oracle(sc):
    truth, events, _, gap = sc
    res = run_records(JoinConfig.single("speed", "torque", max_gap=opt_ms(gap)), events)
    assert res.duplicates() == []
    assert res.pair_set() == expected(truth, gap)
    assert res.late == []


@LSB_SETTINGS
@given(scenario())
def test_batch_path_equals_oracle_for_any_cuts(sc):
    truth, events, cuts, gap = sc
    cfg = JoinConfig.single("speed", "torque", max_gap=opt_ms(gap))
    res = run_batches(cfg, events, cuts)
    assert res.duplicates() == []
    assert res.pair_set() == expected(truth, gap)


@LSB_SETTINGS
@given(scenario(max_len=60), st.data())
def test_paths_agree_and_leave_identical_state(sc, data):
    """Same records in, same pairs and byte-identical state out, whatever the cuts."""
    _, events, cuts, gap = sc
    cfg = JoinConfig.single("speed", "torque", max_gap=opt_ms(gap))
    stop = data.draw(st.integers(0, len(events)))
    a = run_records(cfg, events[:stop])
    b = run_batches(cfg, events[:stop], cuts)
    assert a.snapshots == b.snapshots
    assert sorted(a.pairs) == sorted(b.pairs)


@LSB_SETTINGS
@given(scenario(max_len=80), st.data())
def test_serialize_restore_at_random_points(sc, data):
    truth, events, cuts, gap = sc
    cfg = JoinConfig.single("speed", "torque", max_gap=opt_ms(gap))
    points = frozenset(data.draw(st.lists(st.integers(0, len(events)), max_size=8)))
    res = run_records(cfg, events, restore_at=points)
    assert res.duplicates() == []
    assert res.pair_set() == expected(truth, gap)
    # Batch path: every batch boundary goes through bytes (serialize=True), plus object-only runs.
    assert run_batches(cfg, events, cuts, serialize=False).pair_set() == res.pair_set()


@LSB_SETTINGS
@given(stream_times(30), stream_times(30), st.data())
def test_pairs_are_emitted_exactly_when_certain(left, right, data):
    """After every prefix, emitted so far == the pairs no continuation can remove."""
    streams = [[("m", "l", t, 0.0) for t in left], [("m", "r", t, 0.0) for t in right]]
    events = data.draw(interleaving(streams))
    cfg = JoinConfig.single("l", "r")
    state = JoinState.empty(cfg)
    emitted: set[tuple[int, int]] = set()
    seen = {"l": [], "r": []}
    for _, q, t, v in events:
        for p in process_record(cfg, "m", state, q, t, v).pairs:
            emitted.add((p.left_time, p.right_time))
        seen[q].append(t)
        wl = seen["l"][-1] if seen["l"] else -1
        wr = seen["r"][-1] if seen["r"] else -1
        assert emitted == certain_pairs(seen["l"], seen["r"], wl, wr)


@LSB_SETTINGS
@given(scenario(max_len=50, max_keys=2), st.data())
def test_several_pairs_per_key_from_one_config(sc, data):
    """speed~torque and current~load (and speed~current sharing speed) from one state."""
    truth, events, cuts, gap = sc
    cfg = JoinConfig(
        pairs=(
            PairSpec("speed", "torque"),
            PairSpec("current", "load", product),
            PairSpec("speed", "current", product),
        ),
        max_gap=opt_ms(gap),
    )
    extra = {}
    streams = [[e for e in events if e[0] == k] for k in truth]
    for k in truth:
        cur, load = data.draw(stream_times(50)), data.draw(stream_times(50))
        extra[k] = (cur, load)
        streams.append([(k, "current", t, 1.0) for t in cur])
        streams.append([(k, "load", t, 2.0) for t in load])
    merged = data.draw(interleaving(streams))
    want = set()
    for k in truth:
        sp, tq = truth[k]
        cur, load = extra[k]
        want |= {(k, "speed~torque", a, b) for a, b in oracle_pairs(sp, tq, gap)}
        want |= {(k, "current~load", a, b) for a, b in oracle_pairs(cur, load, gap)}
        want |= {(k, "speed~current", a, b) for a, b in oracle_pairs(sp, cur, gap)}
    for res in (run_records(cfg, merged), run_batches(cfg, merged, cuts)):
        assert res.duplicates() == []
        assert res.pair_set() == want


def test_in_order_streams_keep_memory_bounded():
    cfg = JoinConfig.single("l", "r")
    state = JoinState.empty(cfg)
    peak = 0
    for i in range(20_000):
        process_record(cfg, "m", state, "l" if i % 3 else "r", i, 1.0)
        peak = max(peak, state.buffered_records())
    assert peak <= 4
    res = process_batch(
        cfg, None, np.array(["l", "r"] * 10_000), np.repeat(np.arange(10_000), 2), np.ones(20_000)
    )
    assert res.state.buffered_records() <= 2
    assert len(to_bytes(res.state, cfg)) < 200
