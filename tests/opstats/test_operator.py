"""The operation statistics' rules one at a time: the worked example of
docs/operation-statistics.md, faults in the values, a component without a rating, ratings per
thing, a changed rating, and a machine that stops (the idle timer)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import timedelta

import pytest

from lsb.results import mechanical_power
from operators import Records, reasons
from operators.keyed import KeyedStates
from opstats import (
    Catalogue,
    CycleStats,
    OperationStatistics,
    Pattern,
    PowerInputs,
    Rating,
    StatsConfig,
)
from opstats.catalogue import Entry

S = 1000  # ms
INPUTS = PowerInputs(Pattern("actSpeed_*"), Pattern("vaTorque_*"), mechanical_power)
DEFAULTS = Catalogue()


def operator(
    catalogue: Catalogue = DEFAULTS, idle: timedelta = timedelta(0)
) -> OperationStatistics:
    return OperationStatistics(
        StatsConfig(INPUTS, catalogue, idle_timeout=idle), max_future=timedelta(hours=1)
    )


def records(
    rows: Sequence[tuple[int, float | None, float | None]], component: str = "C11"
) -> Records:
    """(seconds, speed, torque) rows as the bridge splits them: one record per quantity given."""
    out: list[tuple[str, int, float, str]] = []
    for t, speed, torque in rows:
        if speed is not None:
            out.append((f"actSpeed_{component}", t * S, speed, f"s{t}"))
        if torque is not None:
            out.append((f"vaTorque_{component}", t * S, torque, f"m{t}"))
    return Records.of(*zip(*out, strict=True))


#: docs/operation-statistics.md, "A worked example"
EXAMPLE = [
    (0, 1000, 100),
    (30, 1000, 180),
    (60, 1500, 150),
    (90, 1000, -50),
    (120, 0, 0),
    (300, 1000, 150),
    (580, 1000, 200),
]


def test_the_worked_example_of_the_docs() -> None:
    op = operator().for_key("R0815")
    state, step = op.process(op.initial(), records(EXAMPLE), now_ms=0)
    assert step.cycles == []  # the last record holds on past the end of the first cycle
    state, step = op.finish(state)
    first, second = step.cycles
    assert (first.start_ms, first.end_ms, second.start_ms) == (0, 600 * S, 600 * S)
    # 0-20, 20-40, 40-60, 60-80, 80-100, over-100 in seconds
    assert first.band_ms == (60 * S, 30 * S, 30 * S, 60 * S, 30 * S, 50 * S)
    assert (first.data_ms, first.no_data_ms) == (260 * S, 340 * S)
    assert first.duty_pct == pytest.approx(30.77, abs=0.005)
    assert not first.duty_exceeded
    assert first.motoring_kwh == pytest.approx(0.81885, abs=5e-6)
    assert first.regenerative_kwh == pytest.approx(0.043633, abs=5e-7)
    assert first.energy_kwh == pytest.approx(0.86248, abs=5e-6)
    assert first.mean_w == pytest.approx(11942.08, abs=0.01)
    assert first.mean_pct == pytest.approx(59.71, abs=0.005)
    assert (first.peak_w, first.peak_pct) == (
        pytest.approx(23561.94, abs=0.01),
        pytest.approx(117.81, abs=0.005),
    )
    assert first.cumulative_ms == first.band_ms
    assert second.band_ms == (0, 0, 0, 0, 0, 40 * S)
    assert (second.data_ms, second.duty_pct, second.duty_exceeded) == (40 * S, 100.0, True)
    assert second.motoring_kwh == pytest.approx(0.232711, abs=5e-7)
    assert second.cumulative_ms == (60 * S, 30 * S, 30 * S, 60 * S, 30 * S, 90 * S)
    assert first.rating_id == second.rating_id == Rating().rating_id


def test_a_value_that_is_not_a_number_or_a_fault_is_handed_back_never_banded() -> None:
    op = operator().for_key("R0815")
    batch = records(
        [
            (0, 1000, 100),
            (10, math.nan, 100),
            (20, 1000, math.inf),
            (30, 100_000, 100),
            (40, 1000, 0),
        ]
    )
    state, step = op.process(op.initial(), batch, now_ms=0)
    state, end = op.finish(state)
    handed = sorted(
        zip(
            step.late.quantity.tolist(),
            (step.late.event_time_ms // S).tolist(),
            step.reasons,
            strict=True,
        )
    )
    assert handed == [
        ("actSpeed_C11", 10, reasons.INVALID_VALUE),
        ("actSpeed_C11", 30, reasons.BEYOND_BOUND),  # 1,047 kW: over 10x the 20 kW rating
        ("vaTorque_C11", 20, reasons.INVALID_VALUE),
        ("vaTorque_C11", 30, reasons.BEYOND_BOUND),  # both records that made the fault
    ]
    (cycle,) = end.cycles
    # 0-30: 10.5 kW held (the torque of 10 s and the speed of 20 s count, their partners not);
    # the fault at 30 s is no load: the values of 20 s hold on to 40 s; 40 s: 0 W for 60 s
    assert cycle.band_ms == (60 * S, 0, 40 * S, 0, 0, 0)
    assert cycle.peak_w < 20_000


def test_a_component_without_an_entry_uses_the_defaults_and_says_so() -> None:
    catalogue = Catalogue((Entry("R0815", "C11", Rating(5.0), 3),))
    table = KeyedStates(operator(catalogue))
    both = Records.of(
        [*records([(0, 100, 10)], "C11").quantity, *records([(0, 100, 10)], "C12").quantity],
        [0, 0, 0, 0],
        [100.0, 10.0, 100.0, 10.0],
        ["a", "b", "c", "d"],
    )
    table.step([("R0815", both), ("H31415", both)], now_ms=0)
    ended = {
        (thing, c.component): c
        for thing, state in table.states.items()
        for c in table.operator.for_key(thing).finish(state)[1].cycles
    }
    assert ended[("R0815", "C11")].rating.rated_power_kw == 5.0
    assert not ended[("R0815", "C11")].rating.defaulted
    assert ended[("R0815", "C12")].rating.defaulted
    assert ended[("H31415", "C11")].rating.defaulted
    assert ended[("R0815", "C11")].band_ms[0] == 60 * S  # 105 W of 5 kW
    assert ended[("R0815", "C11")].rating_id != ended[("H31415", "C11")].rating_id


def test_a_changed_rating_starts_the_component_afresh_under_its_new_id() -> None:
    old = operator(Catalogue((Entry("*", "*", Rating(20.0), 1),))).for_key("R0815")
    state, _ = old.process(old.initial(), records([(0, 1000, 100), (30, 1000, 100)]), now_ms=0)
    state, step = old.process(state, records([(700, 1000, 100), (730, 1000, 100)]), now_ms=1)
    (before,) = step.cycles
    new = operator(Catalogue((Entry("*", "*", Rating(10.0), 1),))).for_key("R0815")
    state = new.restore(old.snapshot(state))
    state, step = new.process(state, records([(760, 1000, 100)]), now_ms=2)
    state, step = new.finish(state)
    (after,) = step.cycles
    assert before.rating_id != after.rating_id
    assert after.cumulative_ms == after.band_ms  # nothing of the old rating's time mixed in
    assert after.band_ms[-1] == 60 * S  # 10.5 kW is over the new 10 kW rating


def test_a_machine_that_stops_has_its_last_cycle_emitted_after_the_idle_timeout() -> None:
    idle = 5 * 60 * S
    table = KeyedStates(operator(idle=timedelta(milliseconds=idle)))
    now = 1_000_000
    step = table.step([("R0815", records([(0, 1000, 100), (30, 1000, 100)]))], now)
    assert [out.cycles for _, _, out in step.emitted] == [[]]
    assert table.step([], now + idle - 1).emitted == []  # not yet
    step = table.step([], now + idle)
    ((_, _, flushed),) = step.emitted
    (cycle,) = flushed.cycles
    assert (cycle.start_ms, cycle.data_ms) == (0, 90 * S)  # 30 s, then the 60 s hold
    # the machine resumes: a record behind what was emitted is handed back, later ones count
    resumed = records([(500, 1000, 100), (700, 1000, 100), (730, 1000, 100)])
    step = table.step([("R0815", resumed)], now + idle + 10)
    ((_, _, out),) = step.emitted
    assert sorted(zip((out.late.event_time_ms // S).tolist(), out.reasons, strict=True)) == [
        (500, reasons.WINDOW_CLOSED),
        (500, reasons.WINDOW_CLOSED),
    ]
    op = table.operator.for_key("R0815")
    _, end = op.finish(table.states["R0815"])
    (later,) = end.cycles
    assert (later.start_ms, later.data_ms) == (600 * S, 90 * S)
    assert later.cumulative_ms[2] == 180 * S  # 10.5 kW: both stretches in the 40-60 % band


def test_a_timer_due_long_after_the_last_records_is_armed_again_not_fired() -> None:
    """Nothing ran for more than two idle periods (a stop): the machine had no chance to speak."""
    idle = 60 * S
    op = operator(idle=timedelta(milliseconds=idle)).for_key("R0815")
    state, _ = op.process(op.initial(), records([(0, 1000, 100)]), now_ms=0)
    state, out = op.on_timer(state, 3 * idle)
    assert out is None and op.deadline(state) == 4 * idle
    state, out = op.on_timer(state, 4 * idle)
    assert out is not None and [c.data_ms for c in out.cycles] == [60 * S]


def test_only_the_two_inputs_of_a_component_count() -> None:
    op = operator().for_key("R0815")
    batch = Records.of(
        ["actSpeed_C11", "vaTorque_C12", "vaLoad_C11", "actSpeed_", "vaTorque_C11"],
        [0, 0, 0, 0, 0],
        [1000.0, 100.0, 5.0, 1.0, 100.0],
        ["a", "b", "c", "d", "e"],
    )
    state, _ = op.process(op.initial(), batch, 0)
    assert sorted(state) == ["C11", "C12"]
    _, end = op.finish(state)
    assert [(c.component, c.data_ms) for c in end.cycles] == [("C11", 60 * S)]


def test_each_figure_is_consistent() -> None:
    op = operator().for_key("R0815")
    _, end = op.finish(op.process(op.initial(), records(EXAMPLE), 0)[0])
    for c in end.cycles:
        assert isinstance(c, CycleStats)
        assert sum(c.band_ms) == c.data_ms and c.data_ms + c.no_data_ms == c.cycle_ms
        assert c.mean_w <= c.peak_w * (1 + 1e-12)
