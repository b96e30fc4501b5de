"""The single pass's per-thing function against the two jobs' functions it replaces (no Spark:
the GroupState is a stand-in with Spark's timeout rules).

The join's and the windows' functions are each proven against their brute-force oracles; the
single pass must write, record for record, what they write together, however the input is cut
into batches, and flush a quantity that fell idle while its thing's other quantities go on.
"""

from __future__ import annotations

import math
from collections import Counter

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from operators import Records
from spark_jobs import passes, renderers
from spark_jobs.config import SinglePassSettings
from tests.support.group_state import NO_DEADLINE, FakeGroupState
from tests.support.plain import plain

NOW_MS = 1_700_000_000_000
T0 = NOW_MS - 3_600_000
PAIRS = "speed:torque:mechanical_power"


class Keyed:
    """A stateful function run as Spark runs it: per key, data calls, and timer calls in a batch
    without data for the key once its timer is due. The state is a GroupState
    stand-in (``FakeGroupState``), which clears the timer at every call unless the function sets
    it again."""

    def __init__(self, function) -> None:
        self.function = function
        self.states: dict[tuple, FakeGroupState] = {}

    def batch(self, groups: dict[tuple, pd.DataFrame], now_ms: int) -> list[pd.DataFrame]:
        out = []
        for key, frame in groups.items():
            out += list(self.function(key, iter([frame]), self.call(key, now_ms, False)))
        for key, state in list(self.states.items()):
            if (
                key not in groups
                and state.deadline_ms != NO_DEADLINE
                and state.deadline_ms <= now_ms
            ):
                out += list(self.function(key, iter([]), self.call(key, now_ms, True)))
        return out

    def call(self, key: tuple, now_ms: int, timed_out: bool) -> FakeGroupState:
        previous = self.states.get(key)
        self.states[key] = FakeGroupState(
            None if previous is None else previous.value, now_ms, timed_out
        )
        return self.states[key]


def frame(records: list[tuple], offset: int) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "thing": [r[0] for r in records],
            "quantity": [r[1] for r in records],
            "event_time_ms": pd.array([r[2] for r in records], dtype="int64"),
            "value": pd.array([r[3] for r in records], dtype="float64"),
            "row_id": [r[4] for r in records],
            "kafka_partition": 0,
            "kafka_offset": range(offset, offset + len(records)),
            "undecodable_key": None,
            "undecodable_value": None,
        }
    )


def two_jobs(settings: SinglePassSettings):
    joiner = Keyed(passes.join_function(passes.join_plan(settings), settings.max_future))
    windows = Keyed(passes.window_pass(settings))
    plan = passes.join_plan(settings)

    def run(batch: pd.DataFrame, now_ms: int) -> dict[str, list[pd.DataFrame]]:
        joined = batch[plan.selects(batch["quantity"].to_numpy())]
        return {
            "join": joiner.batch({(t,): g for t, g in joined.groupby("thing")}, now_ms),
            "aggregate": windows.batch({(t,): g for t, g in batch.groupby("thing")}, now_ms),
        }

    return run


def one_pass(settings: SinglePassSettings):
    keyed = Keyed(passes.thing_pass(settings))

    def run(batch: pd.DataFrame, now_ms: int) -> dict[str, list[pd.DataFrame]]:
        out = pd.concat(
            keyed.batch({(t,): g for t, g in batch.groupby("thing")}, now_ms) or [pd.DataFrame()]
        )
        return {
            stage: [out[out.get("stage") == stage]] if len(out) else []
            for stage in ("join", "aggregate")
        }

    return run


def rows(frames: list[pd.DataFrame], fields: list[tuple[str, str]]) -> Counter:
    """The output records as comparable tuples (only the job's own columns; NaN equal to NaN)."""
    names = [name for name, _ in fields]

    def plain(value):
        if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
            return None
        return value.item() if hasattr(value, "item") else value

    return Counter(
        tuple(plain(v) for v in row)
        for f in frames
        if len(f)
        for row in f[names].itertuples(index=False)
    )


def compare(
    records: list[tuple], cuts: list[int], clock_steps: list[int], settings: SinglePassSettings
) -> None:
    jobs, passed = two_jobs(settings), one_pass(settings)
    want: dict[str, list[pd.DataFrame]] = {"join": [], "aggregate": []}
    got: dict[str, list[pd.DataFrame]] = {"join": [], "aggregate": []}
    bounds = [0, *sorted(set(c % (len(records) + 1) for c in cuts)), len(records)]
    now = NOW_MS
    for (start, end), step in zip(
        zip(bounds, bounds[1:], strict=False), clock_steps + [0] * len(bounds), strict=False
    ):
        batch = frame(records[start:end], start)
        now += step
        for target, run in ((want, jobs), (got, passed)):
            for stage, frames in run(batch, now).items():
                target[stage] += frames
    assert rows(got["join"], renderers.JOIN_FIELDS) == rows(want["join"], renderers.JOIN_FIELDS)
    assert rows(got["aggregate"], renderers.WINDOW_FIELDS) == rows(
        want["aggregate"], renderers.WINDOW_FIELDS
    )


record = st.tuples(
    st.sampled_from(["T1", "T2"]),
    st.sampled_from(["speed", "torque", "temp"]),
    st.integers(0, 40).map(lambda s: T0 + s * 500),
    st.integers(0, 5).map(float),
    st.sampled_from(["a", "b"]),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(record, min_size=1, max_size=60), st.lists(st.integers(0, 60), max_size=6))
def test_the_pass_writes_what_the_join_and_the_aggregate_write(
    records: list[tuple], cuts: list[int]
) -> None:
    """Random things, quantities, repeats and disorder, random batch cuts: pairs, windows and
    late records equal the two jobs' (tumbling, sliding and session windows)."""
    settings_ = SinglePassSettings.from_sources(
        cli={
            "pairs": PAIRS,
            "tumbling": "2s",
            "sliding": "4s/2s",
            "session_gap": "3s",
            "allowed_lateness": "1s",
            "idle_timeout": "off",
        }
    )
    compare([(*r[:4], f"{r[4]}{i}") for i, r in enumerate(records)], cuts, [], settings_)


def test_a_far_future_record_is_set_aside_by_each_stage_as_before() -> None:
    settings_ = SinglePassSettings.from_sources(cli={"pairs": PAIRS, "idle_timeout": "off"})
    records = [
        ("T1", "speed", T0, 1.0, "a"),
        ("T1", "torque", T0 + 500, 2.0, "b"),
        ("T1", "torque", NOW_MS + 3_600_001, 9.0, "bad"),
        ("T1", "speed", T0 + 1000, 3.0, "c"),
    ]
    compare(records, [2], [], settings_)
    out = one_pass(settings_)(frame(records, 0), NOW_MS)
    late = {
        stage: f[0][f[0]["reason"] == "future_timestamp"]["row_id"].tolist()
        for stage, f in out.items()
    }
    assert late == {"join": ["bad"], "aggregate": ["bad"]}


def idle_run(batches: list[tuple[int, list[tuple]]], idle: str) -> list[tuple[int, str]]:
    """(ms after NOW_MS, quantity) of every window the pass emits; each batch's windows and
    late records equal the two jobs' on the way."""
    settings_ = SinglePassSettings.from_sources(
        cli={"pairs": PAIRS, "tumbling": "10s", "idle_timeout": idle}
    )
    jobs, passed = two_jobs(settings_), one_pass(settings_)
    emitted = []
    for k, (at_ms, batch) in enumerate(batches):
        want, got = (
            jobs(frame(batch, 10 * k), NOW_MS + at_ms),
            passed(frame(batch, 10 * k), NOW_MS + at_ms),
        )
        assert rows(got["aggregate"], renderers.WINDOW_FIELDS) == rows(
            want["aggregate"], renderers.WINDOW_FIELDS
        )
        emitted += [
            (at_ms, q)
            for f in got["aggregate"]
            for q in f[f["record_type"] == "aggregate"]["quantity"]
        ]
    return emitted


def speed(k: int) -> tuple:
    return ("T1", "speed", T0 + k * 1000, float(k), f"s{k}")


def test_a_quantity_falls_idle_while_its_things_other_quantities_go_on() -> None:
    """Two jobs: (T1, temp)'s own timer flushes its windows. One pass: the thing has data in
    every batch (speed), yet temp's windows are emitted after its idle timeout, as before."""
    temp = ("T1", "temp", T0, 20.0, "t0")
    batches = [(0, [temp, speed(0)])] + [(k * 1000, [speed(k)]) for k in range(1, 8)]
    assert idle_run(batches, "5s") == [(5000, "temp")]


def test_a_timer_long_overdue_is_armed_again_not_fired() -> None:
    """A timer found more than two idle periods late means the query was not running: the key
    had no chance to speak, so its windows stay open one more idle period (both shapes)."""
    temp = ("T1", "temp", T0, 20.0, "t0")
    batches = [
        (0, [temp, speed(0)]),
        (11_000, [speed(1)]),
        (13_000, [speed(2)]),
        (16_000, [speed(3)]),
    ]
    assert idle_run(batches, "5s") == [(16_000, "temp")]
    assert idle_run([(0, [temp]), (11_000, []), (16_000, [])], "5s") == [(16_000, "temp")]


def test_windows_carry_the_clock_that_made_them_closable_and_null_after_an_idle_flush() -> None:
    """closed_at_ms reaches the output columns in both shapes: speed's first window closes at the
    record 1 s (the allowed lateness) past its end; temp's window, flushed idle, has none."""
    settings_ = SinglePassSettings.from_sources(
        cli={"pairs": PAIRS, "tumbling": "10s", "allowed_lateness": "1s", "idle_timeout": "5s"}
    )
    jobs, passed = two_jobs(settings_), one_pass(settings_)
    temp = ("T1", "temp", T0, 20.0, "t0")
    closed: dict[str, dict[tuple, int | None]] = {"jobs": {}, "pass": {}}
    for k, batch in enumerate([[temp, speed(0)]] + [[speed(k)] for k in range(1, 13)]):
        for shape, run in (("jobs", jobs), ("pass", passed)):
            for f in run(frame(batch, 10 * k), NOW_MS + k * 1000)["aggregate"]:
                windows = f[f["record_type"] == "aggregate"]
                closed[shape] |= {
                    (q, start): None if pd.isna(at) else int(at)
                    for q, start, at in zip(
                        windows["quantity"],
                        windows["window_start_ms"],
                        windows["closed_at_ms"],
                        strict=False,
                    )
                }
    assert closed["pass"] == closed["jobs"] == {("temp", T0): None, ("speed", T0): T0 + 11_000}


@settings(max_examples=40, deadline=None)
@given(st.lists(record, min_size=1, max_size=40), st.integers(0, 40))
def test_a_things_state_comes_back_from_its_snapshot_as_it_was(
    records: list[tuple], cut: int
) -> None:
    """The composed state (the join's and every quantity's windows', with their timers) is one
    binary value; restored, it is the state that was written, and goes on as it would have."""
    settings_ = SinglePassSettings.from_sources(
        cli={"pairs": PAIRS, "tumbling": "2s", "session_gap": "3s", "idle_timeout": "5s"}
    )
    operator = passes.thing_operator(settings_, passes.join_plan(settings_))
    batch = Records.of(
        [r[1] for r in records],
        [r[2] for r in records],
        [r[3] for r in records],
        [f"{r[4]}{i}" for i, r in enumerate(records)],
    )
    cut %= len(records) + 1
    state, _ = operator.process(operator.initial(), batch.take(slice(0, cut)), NOW_MS)
    snapshot = operator.snapshot(state)
    assert isinstance(snapshot, bytes)
    restored = operator.restore(bytearray(snapshot))  # Spark may hand back a bytearray
    assert operator.snapshot(restored) == snapshot
    assert operator.deadline(restored) == operator.deadline(state)
    rest = batch.take(slice(cut, None))
    _, after_restore = operator.process(restored, rest, NOW_MS + 1000)
    _, uninterrupted = operator.process(state, rest, NOW_MS + 1000)
    assert plain(after_restore) == plain(uninterrupted)


def test_a_thing_keeps_state_for_its_first_names_only_and_sets_the_others_aside() -> None:
    """THING_MAX_QUANTITIES: past the limit a new name's records become late records of the
    reason quantity_limit (stage quantities), in the single pass, the join job and the aggregate
    job, and no window or pair is ever made of them."""
    settings_ = SinglePassSettings.from_sources(
        cli={
            "pairs": "speed_*:torque_*",
            "tumbling": "1s",
            "allowed_lateness": "0s",
            "max_quantities": 2,
        }
    )
    records = [
        ("M1", q, T0 + t * 100, 1.0, f"{q}{t}")
        for t in range(30)
        for q in ("speed_C1", "torque_C1", f"speed_X{t}")
    ]
    jobs = (
        passes.thing_pass(settings_),
        passes.join_pass(settings_),
        passes.window_pass(settings_),
    )
    for function in jobs:
        out = pd.concat(Keyed(function).batch({("M1",): frame(records, 0)}, NOW_MS))
        late = out[out["record_type"] == "late"]
        assert set(zip(late["stage"], late["reason"], strict=True)) == {
            ("quantities", "quantity_limit")
        }
        assert sorted(late["quantity"]) == sorted(f"speed_X{t}" for t in range(30))
        made = out[out["record_type"] != "late"]
        assert len(made) and not made.isin({"quantity": [f"speed_X{t}" for t in range(30)]}).any(
            axis=None
        )
        paired = made.get("left_quantity", pd.Series(dtype=object))
        assert not paired.fillna("").str.startswith("speed_X").any()


def test_the_aggregate_jobs_windows_behind_the_limit_are_those_of_the_admitted_names_alone() -> (
    None
):
    """The aggregate job's limit takes records away and changes nothing else: its windows are
    those of the same job without a limit fed only the first ``limit`` names' records."""
    limited = SinglePassSettings.from_sources(
        cli={"tumbling": "1s", "allowed_lateness": "0s", "max_quantities": 3}
    )
    unlimited = SinglePassSettings.from_sources(
        cli={"tumbling": "1s", "allowed_lateness": "0s", "max_quantities": 0}
    )
    names = [f"q{n}" for n in range(6)]
    records = [
        ("M1", names[(t * 7 + n) % 6], T0 + t * 150 + n, float(t * n), f"r{t}.{n}")
        for t in range(40)
        for n in range(2)
    ]
    admitted = list(dict.fromkeys(r[1] for r in records))[:3]
    kept = [r for r in records if r[1] in admitted]
    got = Keyed(passes.window_pass(limited)).batch({("M1",): frame(records, 0)}, NOW_MS)
    want = Keyed(passes.window_pass(unlimited)).batch({("M1",): frame(kept, 0)}, NOW_MS)
    aggregates = [f[f["record_type"] == "aggregate"] for f in got]
    assert rows(aggregates, renderers.WINDOW_FIELDS) == rows(want, renderers.WINDOW_FIELDS)
    assert sum(len(f) for f in aggregates) > 0
