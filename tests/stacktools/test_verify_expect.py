"""verify's expectation against the specification's oracles (tests/oracles), on random
files: both are written from the docs independently (verify's with numpy per key, the oracles by
brute force), so agreeing on every point means something. Rows come with ties, copies (identical
and changed), several Things and out-of-order times; replayed in event-time or file order."""

from __future__ import annotations

import json
import math
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stacktools.verify.events import read_records
from stacktools.verify.expect import expectation
from stacktools.verify.rules import Pair, Rules, Window, parse_windows
from tests.oracles.join import Pair as OraclePair
from tests.oracles.pipeline import PipelineSpec, expected_outputs
from tests.oracles.points import Identity, expected_points, identity, present
from tests.oracles.rows import event_time_order, file_rows, measurements
from tests.oracles.windows import Spec

CLOSE = {"mean": 1e-12, "result": 1e-12, "stddev": 1e-9}

row = st.fixed_dictionaries(
    {
        "Thing": st.sampled_from(["T1", "T2", "M 3"]),
        "Timestamp": st.integers(1_554_076_800_000, 1_554_076_800_000 + 40_000),
        "id": st.sampled_from(["a", "b", ""]),
    },
    optional={
        "speed": st.integers(-3, 3).map(float),
        "torque": st.floats(-5, 5, allow_nan=False).map(lambda v: round(v, 3)),
        "load": st.sampled_from([0.5, 1.25, 7.0]),
    },
)
windows = st.lists(
    st.sampled_from(
        [
            Window("tumbling", 5_000, 5_000),
            Window("sliding", 10_000, 3_000),
            Window("session", 2_000, 2_000),
        ]
    ),
    min_size=1,
    max_size=3,
    unique=True,
)


def oracle_points(path: Path, rules: Rules, order: str) -> dict[Identity, dict]:
    rows = file_rows(path)
    if order == "event-time":
        rows = event_time_order(rows)
    arrival = [m for r in rows for m in measurements([r])]  # every copy, as the topic holds it
    spec = PipelineSpec(
        pairs=tuple(OraclePair(p.left, p.right, p.result_name) for p in rules.pairs),
        max_gap_ms=rules.max_gap_ms,
        windows=tuple(Spec(w.kind, w.size_ms, w.slide_ms) for w in rules.windows),
        lateness_ms=rules.lateness_ms,
    )
    points = expected_points(expected_outputs(spec, measurements(rows), arrival))
    for m in arrival:  # InfluxDB keeps the last copy written (docs/windows.md, the last wins)
        key = identity("raw", m.time_ms * 1_000_000, thing=m.thing, quantity=m.quantity)
        points[key] = {"value": m.value}
    return points


def _value(v: object) -> object:
    if isinstance(v, float) and math.isnan(v):
        return None
    return v.item() if hasattr(v, "item") else v


def verify_points(path: Path, rules: Rules, order: str) -> dict[Identity, dict]:
    frames = expectation(read_records(path, order), rules).frames
    out: dict[Identity, dict] = {}
    for r in frames["raw"].to_dict("records"):
        out[identity("raw", r["time_ns"], thing=r["thing"], quantity=r["quantity"])] = {
            "value": r["value"]
        }
    for r in frames["joined"].to_dict("records"):
        if r["pending"]:  # an idle flush may emit it, or not
            continue
        key = identity(
            "joined",
            r["time_ns"],
            thing=r["thing"],
            pair=r["pair"],
            result_name=r["result_name"],
            component=r["component"] or None,
            long_gap_ms=None if math.isnan(r["long_gap_ms"]) else int(r["long_gap_ms"]),
        )
        out[key] = present(
            result=r["result"],
            left_value=r["left_value"],
            right_value=r["right_value"],
            left_time_ms=r["left_time_ms"],
            right_time_ms=r["right_time_ms"],
        )
    for r in frames["aggregate"].to_dict("records"):
        if r["pending"]:
            continue
        key = identity(
            "aggregate", r["time_ns"], thing=r["thing"], quantity=r["quantity"], window=r["window"]
        )
        names = ("count", "mean", "min", "max", "stddev", "window_end_ms", "closed_at_ms")
        out[key] = present(**{n: _value(r[n]) for n in (*names, "duration_ms")})
    for r in frames["late"].to_dict("records"):
        key = identity(
            "late",
            r["time_ns"],
            thing=r["thing"],
            quantity=r["quantity"],
            stage=r["stage"],
            reason=r["reason"],
        )
        out[key] = present(value=r["value"], watermark_ms=_value(r["watermark_ms"]), count=1)
    return out


def assert_same(want: dict[Identity, dict], got: dict[Identity, dict]) -> None:
    assert sorted(want) == sorted(got), (
        sorted(set(want) - set(got))[:3],
        sorted(set(got) - set(want))[:3],
    )
    for key, fields in want.items():
        mine = got[key]
        assert fields.keys() == mine.keys(), (key, fields, mine)
        for name, value in fields.items():
            if name in CLOSE:
                assert math.isclose(value, mine[name], rel_tol=CLOSE[name], abs_tol=1e-12), (
                    key,
                    name,
                    value,
                    mine[name],
                )
            else:
                assert value == mine[name], (key, name, value, mine[name])


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    rows=st.lists(row, min_size=1, max_size=60),
    chosen=windows,
    lateness=st.sampled_from([0, 1_000, 7_000]),
    gap=st.sampled_from([None, 3_000]),
    order=st.sampled_from(["event-time", "file"]),
    pair_result=st.sampled_from(["mechanical_power", "product", "difference"]),
)
def test_expectation_equals_the_oracles(
    tmp_path: Path, rows, chosen, lateness, gap, order, pair_result
) -> None:
    path = tmp_path / "events.json"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    rules = Rules(
        pairs=(Pair("speed", "torque", pair_result), Pair("load", "speed", "product")),
        max_gap_ms=gap,
        windows=tuple(chosen),
        lateness_ms=lateness,
    )
    assert_same(oracle_points(path, rules, order), verify_points(path, rules, order))


component_row = st.fixed_dictionaries(
    {
        "Thing": st.sampled_from(["T1", "T2"]),
        "Timestamp": st.integers(1_554_076_800_000, 1_554_076_800_000 + 40_000),
    },
    optional={
        "speed_A": st.integers(-3, 3).map(float),
        "torque_A": st.integers(-3, 3).map(float),
        "speed_B7": st.integers(-3, 3).map(float),
        "torque_B7": st.integers(-3, 3).map(float),
        "torque_": st.integers(-3, 3).map(float),
        "x": st.integers(-3, 3).map(float),
    },
)


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    rows=st.lists(component_row, min_size=1, max_size=60),
    order=st.sampled_from(["event-time", "file"]),
)
def test_pattern_pairs_expect_each_components_pairs_as_the_oracle(
    tmp_path: Path, rows, order
) -> None:
    path = tmp_path / "events.json"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    rules = Rules(
        pairs=(Pair("speed_*", "torque_*"), Pair("x", "torque_", "product")),
        max_gap_ms=None,
        windows=(Window("tumbling", 5_000, 5_000),),
        lateness_ms=0,
    )
    assert_same(oracle_points(path, rules, order), verify_points(path, rules, order))


def test_python_style_rows_take_the_row_reader_and_agree(tmp_path: Path) -> None:
    """A file pyarrow cannot read column-wise (Python-dict rows, fractional-second stamps)."""
    fast = tmp_path / "fast.json"
    slow = tmp_path / "slow.json"
    rows = [
        {
            "Thing": "T1",
            "Timestamp": 1_554_076_800_000 + 250 * i,
            "speed": float(i % 7),
            "torque": 0.5 * i,
        }
        for i in range(200)
    ]
    fast.write_text("".join(json.dumps(r) + "\n" for r in rows))
    seconds = [{**r, "Timestamp": (1_554_076_800_000 + 250 * i) / 1000} for i, r in enumerate(rows)]
    slow.write_text("".join(repr(r) + "\n" for r in seconds))
    rules = Rules((Pair("speed", "torque"),), None, parse_windows("5s", "", "2s"), 1_000)
    assert_same(verify_points(fast, rules, "file"), verify_points(slow, rules, "file"))
    assert_same(oracle_points(slow, rules, "file"), verify_points(slow, rules, "file"))


def test_pairs_the_data_has_not_made_final_are_pending(tmp_path: Path) -> None:
    """A Thing's speed past its last torque: (x, prev(x)) waits for a torque that may never come;
    the join's idle flush emits it, or not, so verify neither requires nor refuses it."""
    path = tmp_path / "events.json"
    rows = [
        {"Thing": "T1", "Timestamp": 1_554_076_800_000, "speed": 1.0, "torque": 1.0},
        {"Thing": "T1", "Timestamp": 1_554_076_801_000, "speed": 2.0},
        {"Thing": "T1", "Timestamp": 1_554_076_802_000, "speed": 3.0},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    rules = Rules((Pair("speed", "torque"),), None, parse_windows("5s", "", ""), 0)
    joined = expectation(read_records(path, "file"), rules).frames["joined"]
    assert sorted(zip(joined["left_time_ms"] % 10_000, joined["pending"], strict=True)) == [
        (0, False),
        (1000, True),
        (2000, True),
    ]
