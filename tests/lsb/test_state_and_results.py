"""State bytes, result function, output event time and ids."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lsb import (
    JoinConfig,
    JoinState,
    PairSpec,
    flush,
    from_bytes,
    pair_id,
    pair_ids,
    process_batch,
    to_bytes,
)
from lsb.results import mechanical_power, product
from operators import ms
from tests.lsb.per_record import process_record

from .helpers import LSB_SETTINGS, opt_ms


def test_mechanical_power_is_2pi_over_60_speed_torque():
    assert mechanical_power(1000.0, 10.0) == pytest.approx(2 * math.pi / 60 * 1000 * 10)
    np.testing.assert_allclose(
        mechanical_power(np.array([60.0, 0.0]), np.array([1.0, 5.0])), [2 * math.pi, 0.0]
    )


def test_pluggable_result_and_event_time_in_both_paths():
    cfg = JoinConfig(pairs=(PairSpec("a", "b", product, "ab"),))
    st_ = JoinState.empty(cfg)
    process_record(cfg, "k", st_, "a", 10, 3.0)
    (p,) = process_record(cfg, "k", st_, "b", 12, 4.0).pairs
    assert (p.result, p.event_time) == (12.0, 12)
    res = process_batch(cfg, None, np.array(["b", "a"]), np.array([12, 10]), np.array([4.0, 3.0]))
    assert res.pairs.result.tolist() == [12.0] and res.pairs.event_time.tolist() == [12]


def test_ids_are_deterministic_distinct_and_equal_across_paths():
    a = pair_id("R0815", "speed", "torque", 1, 2)
    assert a == pair_id("R0815", "speed", "torque", 1, 2)
    assert len(a) == 32 and int(a, 16) >= 0
    others = {
        pair_id("R0815", "speed", "torque", 2, 1),
        pair_id("R0816", "speed", "torque", 1, 2),
        pair_id("R0815", "current", "load", 1, 2),
        pair_id("R0815", "speed", "torque", 1, 3),
    }
    assert a not in others and len(others) == 4
    lt = np.array([1, 2, -5, 2**62], dtype=np.int64)
    rt = np.array([2, 1, 7, 0], dtype=np.int64)
    assert pair_ids("R0815", "speed", "torque", lt, rt) == [
        pair_id("R0815", "speed", "torque", x, y)
        for x, y in zip(lt.tolist(), rt.tolist(), strict=False)
    ]
    # Same id from the record path and the batch path for the same pair.
    cfg = JoinConfig.single("speed", "torque")
    st_ = JoinState.empty(cfg)
    process_record(cfg, "R0815", st_, "speed", 5, 1.0)
    (p,) = process_record(cfg, "R0815", st_, "torque", 5, 2.0).pairs
    res = process_batch(
        cfg, None, np.array(["speed", "torque"]), np.array([5, 5]), np.array([1.0, 2.0])
    )
    assert res.pairs.ids("R0815", cfg) == [p.id]


state_events = st.lists(
    st.tuples(
        st.sampled_from(["speed", "torque", "current", "load"]),
        st.integers(0, 60),
        st.floats(-1e6, 1e6),
    ),
    max_size=120,
)


@LSB_SETTINGS
@given(state_events, st.sampled_from([0, 3]), st.sampled_from([None, 4]))
def test_state_bytes_round_trip_exactly(events, disorder, timeout):
    cfg = JoinConfig(
        pairs=(PairSpec("speed", "torque"), PairSpec("current", "load")),
        allowed_disorder=ms(disorder),
        partner_timeout=opt_ms(timeout),
    )
    st_ = JoinState.empty(cfg)
    for q, t, v in events:
        process_record(cfg, "k", st_, q, t, v)
        raw = to_bytes(st_, cfg)
        back = from_bytes(raw, cfg)
        assert back == st_
        assert to_bytes(back, cfg) == raw


def test_state_restores_into_a_changed_config_by_name():
    old = JoinConfig(pairs=(PairSpec("speed", "torque"), PairSpec("current", "load")))
    st_ = JoinState.empty(old)
    for q, t in [("speed", 1), ("torque", 2), ("current", 1), ("load", 5)]:
        process_record(old, "k", st_, q, t, 1.0)
    new = JoinConfig(pairs=(PairSpec("current", "load"), PairSpec("a", "b")))
    back = from_bytes(to_bytes(st_, old), new)
    assert back.pairs[0] == st_.pairs[1]
    assert back.quantities[new.quantity_code("current")].last == 1
    assert back.pairs[1].left.times == []
    with pytest.raises(ValueError):
        from_bytes(b"nope" + bytes(10), old)


def test_batch_accepts_bytes_none_and_codes_and_flush_empties_state():
    cfg = JoinConfig.single("speed", "torque")
    r1 = process_batch(
        cfg, None, np.array([0, 1, 1]), np.array([1, 3, 5]), np.array([1.0, 1.0, 1.0])
    )
    assert list(zip(r1.pairs.left_time.tolist(), r1.pairs.right_time.tolist(), strict=False)) == [
        (1, 3)
    ]
    # prev(torque 5) = speed 1 is pending until speed reaches 5 or the stream ends ...
    end = flush(cfg, "k", r1.state_bytes(cfg))
    assert list(zip(end.pairs.left_time.tolist(), end.pairs.right_time.tolist(), strict=False)) == [
        (1, 5)
    ]
    # ... while speed 4 instead takes that place: prev(torque 5) = speed 4, and (1, 5) never exists.
    r2 = process_batch(
        cfg, r1.state_bytes(cfg), np.array(["speed"]), np.array([4]), np.array([1.0])
    )
    assert sorted(zip(r2.pairs.left_time.tolist(), r2.pairs.right_time.tolist(), strict=False)) == [
        (4, 3),
        (4, 5),
    ]
    assert len(flush(cfg, "k", r2.state).pairs) == 0
    assert end.state.is_empty()
    with pytest.raises(ValueError):
        process_batch(cfg, None, np.array([0]), np.array([1, 2]), np.array([1.0]))


def test_column_outputs_for_a_spark_udf():
    cfg = JoinConfig(
        pairs=(PairSpec("speed", "torque"), PairSpec("current", "load", product)),
        partner_timeout=ms(2),
    )
    q = np.array(["speed", "torque", "current", "load", "speed", "speed", "torque"], dtype=object)
    t = np.array([1, 1, 2, 2, 1, 9, 3], dtype=np.int64)
    v = np.arange(7, dtype=np.float64)
    res = process_batch(cfg, None, q, t, v)
    cols = res.pairs.to_columns("R0815", cfg)
    rows = sorted(
        zip(
            cols["left_quantity"],
            cols["right_quantity"],
            cols["left_time"],
            cols["right_time"],
            strict=False,
        )
    )
    # (speed 9, torque 1) waits: torque's timeout watermark is only 9 - 2 = 7.
    assert rows == [("current", "load", 2, 2), ("speed", "torque", 1, 1)]
    assert set(cols["key"]) == {"R0815"} and all(len(i) == 32 for i in cols["id"])
    late = res.late.to_columns("R0815", cfg)
    # speed 1 again: own-stream late; torque 3: 3 <= 9 - 2, timed out by speed for that pair.
    assert list(
        zip(
            late["quantity"],
            late["time"],
            late["reason"],
            late["pair"],
            late["index"],
            strict=False,
        )
    ) == [
        ("speed", 1, "behind_watermark", None, 4),
        ("torque", 3, "partner_timeout", "speed~torque", 6),
    ]
