"""The operation statistics against the brute-force oracle, whatever the arrival interleaving of
the inputs, the batch cuts, the restarts through bytes and the faults in the values; and the
promise that interleavings and cuts change nothing."""

from __future__ import annotations

import math
from collections import Counter
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators import Records
from operators.keyed import KeyedStates
from opstats import Catalogue, OperationStatistics, Pattern, PowerInputs, Rating, StatsConfig
from opstats.catalogue import Entry
from tests.oracles import opstats as oracle

CYCLE_MS, HOLD_MS, OVERLOAD_MS = 10_000, 3_000, 2_000
CATALOGUE = Catalogue(
    (
        Entry("m1", "C2", Rating(2.0, (0.0, 25.0, 50.0, 75.0, 100.0), 50.0, 3.0), 1),
        Entry("*", "*", Rating(5.0, physical_bound=2.0), 2),
    )
)


def power(speed: float, torque: float) -> float:
    return 2.0 * math.pi / 60.0 * speed * torque


def config(partner_timeout_ms: int | None) -> StatsConfig:
    return StatsConfig(
        PowerInputs(Pattern("speed_*"), Pattern("torque_*"), power),
        CATALOGUE,
        cycle=timedelta(milliseconds=CYCLE_MS),
        max_hold=timedelta(milliseconds=HOLD_MS),
        partner_timeout=None
        if partner_timeout_ms is None
        else timedelta(milliseconds=partner_timeout_ms),
        overload_after=timedelta(milliseconds=OVERLOAD_MS),
    )


def definition(partner_timeout_ms: int | None) -> oracle.Definition:
    def rating(thing: str, component: str) -> tuple[float, tuple[float, ...], float]:
        if thing == "m1" and component == "C2":
            return 2000.0, (0.0, 25.0, 50.0, 75.0, 100.0), 3.0
        return 5000.0, (0.0, 20.0, 40.0, 60.0, 80.0, 100.0), 2.0

    return oracle.Definition(
        ("speed_", ""),
        ("torque_", ""),
        power,
        rating,
        CYCLE_MS,
        HOLD_MS,
        partner_timeout_ms,
        lambda thing, component: 50.0 if (thing, component) == ("m1", "C2") else 40.0,
        OVERLOAD_MS,
    )


def run(
    records: list[oracle.Record],
    cuts: list[int],
    restarts: set[int],
    partner_timeout_ms: int | None,
) -> tuple[dict, Counter, list[tuple]]:
    """Every thing through one table of states, batch by batch (cut after the given numbers of
    records), through bytes before the batches in ``restarts``, then the end of the stream."""
    table = KeyedStates(OperationStatistics(config(partner_timeout_ms)))
    emitted = []
    at, now = 0, 1_000
    for k, size in enumerate([*cuts, len(records)]):
        if k in restarts:
            data = table.snapshot()
            table = KeyedStates(OperationStatistics(config(partner_timeout_ms)))
            table.restore(data)
        part = records[at : at + size]
        at += size
        by_thing: dict[str, list] = {}
        for r in part:
            by_thing.setdefault(r[0], []).append(r)
        batches = [
            (thing, Records.of(*zip(*[r[1:] for r in rs], strict=True)))
            for thing, rs in by_thing.items()
        ]
        now += 100
        emitted += [(thing, out) for thing, _, out in table.step(batches, now).emitted]
    for thing in sorted(table.states):
        operator = table.operator.for_key(thing)
        table.states[thing], out = operator.finish(table.states[thing])
        emitted.append((thing, out))
    cycles: dict = {}
    late: Counter = Counter()
    events: list[tuple] = []
    for thing, out in emitted:
        events += [
            (thing, e.cycle.component, e.status, e.since_ms, e.cycle.start_ms, e.why)
            for e in out.events
        ]
        for c in out.cycles:
            key = (thing, c.component, c.start_ms)
            assert key not in cycles, f"cycle {key} emitted twice"
            assert c.end_ms - c.start_ms == CYCLE_MS
            cycles[key] = c
        for quantity, t, v, row_id, reason in zip(
            out.late.quantity,
            out.late.event_time_ms,
            out.late.value,
            out.late.row_id,
            out.reasons,
            strict=True,
        ):
            v = float(v)
            late[
                (
                    thing,
                    str(quantity),
                    int(t),
                    v if math.isfinite(v) else repr(v),
                    str(row_id),
                    reason,
                )
            ] += 1
    return cycles, late, events


def assert_matches(
    cycles: dict,
    late: Counter,
    events: list[tuple],
    expected: tuple[dict, list],
    d: oracle.Definition,
) -> None:
    """``events``: the overload events in the order emitted."""
    want_cycles, want_late = expected
    assert sorted(events) == sorted(oracle.events(want_cycles, d))
    per_component = [(e[0], e[1]) for e in events]
    for key in set(per_component):  # each component's events in their cycles' order
        mine = [e[4] for e in events if (e[0], e[1]) == key]
        assert mine == sorted(mine), key
    assert sorted(cycles) == sorted(want_cycles)
    for key, want in want_cycles.items():
        got = cycles[key]
        assert got.band_ms == want["band_ms"], key
        assert got.cumulative_ms == want["cumulative_ms"], key
        assert (got.data_ms, got.no_data_ms) == (want["data_ms"], want["no_data_ms"]), key
        assert got.peak_w == want["peak_w"], key
        assert got.duty_pct == pytest.approx(float(want["duty_pct"]), rel=1e-12), key
        for name in ("motoring_kwh", "regenerative_kwh", "mean_w"):
            assert getattr(got, name) == pytest.approx(float(want[name]), rel=1e-9, abs=1e-15), (
                key,
                name,
            )
    assert late == Counter(
        (t, q, time, v if math.isfinite(v) else repr(v), row_id, reason)
        for t, q, time, v, row_id, reason in want_late
    )


# --- generated machines ------------------------------------------------------------------

value = st.one_of(
    st.floats(-400, 400, allow_nan=False).map(lambda x: round(x, 2)),
    st.sampled_from([0.0, 100.0, -100.0, 2000.0]),  # rest, steady, braking, a fault's scale
)
rare = st.sampled_from([math.nan, math.inf, 1e9])


@st.composite
def streams(draw: st.DrawFn) -> list[oracle.Record]:
    """Each input of each component of each thing in its own time order, with gaps shorter and
    longer than the hold and the cycle; then merged in an arbitrary interleaving, with copies
    and late stragglers added."""
    per_input = []
    for thing in ("m1", "m2"):
        for component in draw(st.sets(st.sampled_from(["C1", "C2"]), min_size=1)):
            for name in ("speed", "torque"):
                t, out = draw(st.integers(0, 4000)), []
                for k in range(draw(st.integers(0, 25))):
                    t += draw(st.sampled_from([0, 1, 250, 1000, 1000, 2999, 3000, 3001, 12_000]))
                    v = draw(st.one_of(value, value, value, value, value, rare))
                    out.append(
                        (thing, f"{name}_{component}", t, v, f"{thing}-{name}{component}-{k}")
                    )
                per_input.append(out)
            per_input.append([(thing, "temp", 5, 1.0, "x")])  # not an input: never counted
    merged: list[oracle.Record] = []
    heads = [0] * len(per_input)
    while any(h < len(s) for h, s in zip(heads, per_input, strict=True)):
        k = draw(st.sampled_from([i for i, s in enumerate(per_input) if heads[i] < len(s)]))
        merged.append(per_input[k][heads[k]])
        heads[k] += 1
        if merged and draw(st.integers(0, 12)) == 0:  # a copy, or a straggler from the past
            merged.append(draw(st.sampled_from(merged)))
    return merged


cut_points = st.lists(st.integers(0, 15), max_size=10)


@settings(max_examples=150, deadline=None)
@given(
    streams(),
    cut_points,
    st.sets(st.integers(0, 10), max_size=3),
    st.sampled_from([None, 0, 2000, 20_000]),
)
def test_equals_the_oracle_whatever_the_interleaving_cuts_and_restarts(
    records: list, cuts: list[int], restarts: set[int], partner_timeout_ms: int | None
) -> None:
    cycles, late, events = run(records, cuts, restarts, partner_timeout_ms)
    d = definition(partner_timeout_ms)
    assert_matches(cycles, late, events, oracle.expected(records, d), d)


@settings(max_examples=60, deadline=None)
@given(streams(), streams(), cut_points, cut_points)
def test_without_a_partner_timeout_the_interleaving_and_the_cuts_change_no_cycle(
    first: list, second: list, cuts_a: list[int], cuts_b: list[int]
) -> None:
    """The same records of each input in the same order, merged two ways and cut two ways."""

    def per_input(records: list) -> dict:
        out: dict = {}
        for r in records:
            out.setdefault((r[0], r[1]), []).append(r)
        return out

    inputs = per_input(first)
    remerged = []
    order = [key for r in second for key in [(r[0], r[1])] if key in inputs]
    order += [key for key in inputs for _ in inputs[key]]
    heads = dict.fromkeys(inputs, 0)
    for key in order:
        if heads[key] < len(inputs[key]):
            remerged.append(inputs[key][heads[key]])
            heads[key] += 1
    assert Counter(remerged) == Counter(first)
    a, _, events_a = run(first, cuts_a, set(), None)
    b, _, events_b = run(remerged, cuts_b, {1}, None)
    assert sorted(events_a) == sorted(events_b)
    assert {
        k: (c.band_ms, c.motoring_kwh, c.regenerative_kwh, c.peak_w, c.cumulative_ms)
        for k, c in a.items()
    } == {
        k: (c.band_ms, c.motoring_kwh, c.regenerative_kwh, c.peak_w, c.cumulative_ms)
        for k, c in b.items()
    }
