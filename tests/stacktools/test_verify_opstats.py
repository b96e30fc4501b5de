"""verify's operation statistics against the specification's brute-force oracle
(tests/oracles/opstats.py): both written from docs/operation-statistics.md, verify's with
numpy per component, the oracle with exact fractions. Random files with two machines and two
components, gaps shorter and longer than the hold and the cycle, faults beyond the physical
bound, copies and stragglers, replayed in event-time or file order; and the example catalogue's
ratings read by verify's own reader."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stacktools.stack.settings import Settings
from stacktools.verify.compare import compare
from stacktools.verify.events import read_records
from stacktools.verify.expect import expectation
from stacktools.verify.kafka_source import TopicsReader
from stacktools.verify.points import STATS_MEASUREMENTS
from stacktools.verify.ratings import read_ratings
from stacktools.verify.rules import Rules, StatsRules, parse_stats
from streamkit.paths import REPO_ROOT
from streamkit.wire import AvroCodec
from tests.oracles import opstats as oracle
from tests.oracles.rows import event_time_order, file_rows, measurements
from tests.support.verify_records import opstats_fields

START = 1_554_076_800_000
CYCLE_MS, HOLD_MS = 10_000, 3_000

row = st.fixed_dictionaries(
    {
        "Thing": st.sampled_from(["M1", "R0815"]),
        "Timestamp": st.integers(START, START + 60_000),
        "id": st.sampled_from(["a", "b"]),
    },
    optional={
        "actSpeed_C11": st.sampled_from([0.0, 500.0, 1500.0, 3000.0, -800.0]),
        "vaTorque_C11": st.sampled_from([0.0, 20.0, 60.0, 150.0, -40.0, 1000.0, 5e5]),
        "actSpeed_C12": st.sampled_from([100.0, 2000.0]),
        "vaTorque_C12": st.sampled_from([1.0, 25.0, -25.0]),
        "other": st.just(1.0),
    },
)


def stats_rules(timeout_ms: int | None, catalogue: Path | None = None) -> StatsRules:
    parsed = parse_stats("actSpeed_*:vaTorque_*:mechanical_power")
    assert parsed is not None
    left, right, result = parsed
    return StatsRules(
        left, right, result, CYCLE_MS, HOLD_MS, timeout_ms, read_ratings(catalogue), 2_000
    )


def oracle_of(
    path: Path, stats: StatsRules, order: str
) -> tuple[tuple[dict, list], oracle.Definition]:
    rows = file_rows(path)
    if order == "event-time":
        rows = event_time_order(rows)
    arrival = [
        (m.thing, m.quantity, m.time_ms, float(m.value), m.row_id)
        for r in rows
        for m in measurements([r])
    ]

    def rating(thing: str, component: str) -> tuple[float, tuple[float, ...], float]:
        r = stats.ratings.of(thing, component)
        return r.rated_w, r.bands_pct, r.physical_bound

    definition = oracle.Definition(
        stats.left,
        stats.right,
        lambda n, m: 2.0 * math.pi / 60.0 * n * m,
        rating,
        stats.cycle_ms,
        stats.hold_ms,
        stats.partner_timeout_ms,
        lambda thing, component: stats.ratings.of(thing, component).duty_rating_pct,
        stats.overload_after_ms if stats.overload_after_ms is not None else 2**62,
    )
    return oracle.expected(arrival, definition), definition


def assert_agree(path: Path, stats: StatsRules, order: str) -> None:
    frames = expectation(read_records(path, order), Rules((), None, (), 0, stats))
    (want, want_late), definition = oracle_of(path, stats, order)
    cycles, bands = frames.frames["opstats"], frames.frames["opstats_band"]
    got = {(r.thing, r.component, r.start_ms): r for r in cycles.itertuples()}
    assert got.keys() == want.keys()
    for key, w in want.items():
        r = got[key]
        rated = stats.ratings.of(key[0], key[1])
        assert r.rating == rated.rating_id and r.rated_power_kw == rated.rated_power_kw
        assert round(r.data_s * 1000) == w["data_ms"], key
        assert round(r.no_data_s * 1000) == w["no_data_ms"], key
        assert math.isclose(r.duty_pct, float(w["duty_pct"]), rel_tol=1e-12), key
        assert r.duty_exceeded == int(float(w["duty_pct"]) > rated.duty_rating_pct)
        for name in ("motoring_kwh", "regenerative_kwh", "mean_w"):
            assert math.isclose(getattr(r, name), float(w[name]), rel_tol=1e-9, abs_tol=1e-15)
        assert r.peak_w == w["peak_w"], key
        mine = bands[
            (bands.thing == key[0]) & (bands.component == key[1]) & (bands.start_ms == key[2])
        ]
        assert list(mine.band) == rated.band_names
        assert tuple((mine.seconds * 1000).round().astype(int)) == w["band_ms"], key
        assert (
            tuple((mine.cumulative_hours * 3_600_000).round().astype(int)) == w["cumulative_ms"]
        ), key
    alerts = frames.frames["overload"]
    assert sorted(
        (r.thing, r.component, r.status, r.since_ms, r.start_ms, r.why) for r in alerts.itertuples()
    ) == sorted(oracle.events(want, definition))
    late = frames.late_records
    assert late is not None
    late = late[late.stage == "opstats"]
    assert Counter(
        (r.thing, r.quantity, r.time_ms, r.reason) for r in late.itertuples()
    ) == Counter((thing, q, t, reason) for thing, q, t, _, _, reason in want_late)


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    rows=st.lists(row, min_size=1, max_size=80),
    timeout=st.sampled_from([None, 4_000]),
    order=st.sampled_from(["event-time", "file"]),
)
def test_the_statistics_equal_the_oracle(tmp_path: Path, rows, timeout, order) -> None:
    path = tmp_path / "events.json"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert_agree(path, stats_rules(timeout), order)


def test_a_generated_file_with_the_example_catalogue(tmp_path: Path) -> None:
    from simulator.generate import generate

    path = tmp_path / "events.json"
    path.write_text("".join(json.dumps(r) + "\n" for r in generate(4000, 2, seed=9, components=3)))
    for catalogue in ("machine-catalogue.yaml", "machine-catalogue.csv"):
        stats = stats_rules(300_000, REPO_ROOT / "examples" / catalogue)
        assert stats.ratings.of("M0001", "C12").rated_power_kw == 4.0
        assert_agree(path, stats, "event-time")


class CyclesOffline(TopicsReader):
    """The topics reader on given opstats values instead of a broker (no alerts)."""

    def __init__(self, given: list[bytes]) -> None:
        super().__init__(Settings.from_sources(environ={}))
        self.given = given

    def values(self, measurement: str) -> Iterator[bytes]:
        yield from self.given if measurement == "opstats" else []


def test_the_opstats_topic_is_compared_record_by_record(tmp_path: Path) -> None:
    from simulator.generate import generate

    path = tmp_path / "events.json"
    path.write_text("".join(json.dumps(r) + "\n" for r in generate(3000, 2, seed=4, components=2)))
    expected = expectation(read_records(path), Rules((), None, (), 0, stats_rules(300_000, None)))
    codec = AvroCodec("opstats")
    frames = expected.frames
    records = list(opstats_fields(frames["opstats"], frames["opstats_band"]))
    assert len(records) >= 8

    def verdicts(values: list[bytes]) -> dict[str, dict]:
        reader = CyclesOffline(values)
        found = reader.read(STATS_MEASUREMENTS)
        out = {}
        for m in ("opstats", "opstats_band"):
            want, got, keys = reader.compared(m, expected, found[m])
            out[m] = compare(m, want, got, None, keys=keys).counts
        return out

    exact = dict.fromkeys(("missing", "extra", "duplicated", "different"), 0)
    values = [codec.encode(r) for r in records]
    assert verdicts(values) == {"opstats": exact, "opstats_band": exact}
    changed = dict(records[3], band_ms=[*records[3]["band_ms"][:-1], records[3]["band_ms"][-1] + 1])
    got = verdicts([*values[:3], codec.encode(changed), *values[4:], values[5]])
    assert got["opstats_band"]["different"] == 1 and got["opstats"]["duplicated"] == 1
    got = verdicts(values[1:])
    assert got["opstats"]["missing"] == 1
    assert got["opstats_band"]["missing"] == len(records[0]["band_names"])
