"""Every dashboard query against the real InfluxDB and Prometheus of the local stack.

A small data set shaped exactly like the DB connector's output (docs/influxdb-schema.md) goes
into a private database; then every variable query and panel query of the provisioned
dashboards runs through ``check_dashboards`` as Grafana would send it. InfluxDB queries must
return data; Prometheus queries must parse and run (whether the services have produced metrics
yet is the pipeline test's business).
"""

from __future__ import annotations

import itertools
import math
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Message

from db_connector.points import opstats_converter, overload_converter
from stacktools.dashboards import (
    PanelResult,
    check_dashboards,
    load_dashboards,
    load_datasources,
)
from stacktools.dashboards.macros import variable_references
from stacktools.dashboards.settings import DashboardSettings
from stacktools.stack.influx import InfluxClient
from stacktools.stack.settings import Settings
from streamkit.wire import AvroCodec

pytestmark = pytest.mark.stack

THINGS = ("Thing1", "Thing2")
QUANTITIES = ("actSpeed_C11", "vaTorque_C11", "vaPower_C11")
SECONDS = 120
RIGHT_DELAY_MS = 200
WINDOWS = {"tumbling-60000": (60_000, 60_000), "sliding-60000-30000": (60_000, 30_000)}
SESSIONS = "session-5000"


def speed(thing: int, second: int) -> float:
    return 1000.0 + 100 * thing + 5.0 * second


def torque(thing: int, second: int) -> float:
    return 20.0 + thing + (second % 10)


def raw_lines(t0_ms: int) -> list[str]:
    """measurement raw: tags thing, quantity; field value; time = event time."""
    lines = []
    for k, thing in enumerate(THINGS):
        for s in range(SECONDS):
            values = {
                "actSpeed_C11": speed(k, s),
                "vaTorque_C11": torque(k, s),
                "vaPower_C11": 2 * math.pi / 60 * speed(k, s) * torque(k, s),
            }
            for quantity, value in values.items():
                lines.append(
                    f"raw,quantity={quantity},thing={thing} value={value} "
                    f"{(t0_ms + s * 1000) * 1_000_000}"
                )
    return lines


def joined_lines(t0_ms: int) -> list[str]:
    """measurement joined: time = max(left, right) plus the 2*|gap| + 1 ns discriminator."""
    lines = []
    for k, thing in enumerate(THINGS):
        for s in range(SECONDS):
            left_ms, right_ms = t0_ms + s * 1000, t0_ms + s * 1000 + RIGHT_DELAY_MS
            left, right = speed(k, s), torque(k, s)
            ns = max(left_ms, right_ms) * 1_000_000 + 2 * abs(left_ms - right_ms) + 1
            lines.append(
                f"joined,component=C11,pair=actSpeed_C11:vaTorque_C11,result_name=mechanical_power,"
                f"thing={thing} "
                f"result={2 * math.pi / 60 * left * right},left_value={left},right_value={right},"
                f"left_time_ms={left_ms}i,right_time_ms={right_ms}i {ns}"
            )
    return lines


def aggregate_lines(t0_ms: int) -> list[str]:
    """measurement aggregate: one point per window, at the window start."""
    lines = []
    for k, thing in enumerate(THINGS):
        for quantity, of in (("actSpeed_C11", speed), ("vaTorque_C11", torque)):
            for window, (size, slide) in WINDOWS.items():
                for start in range(0, SECONDS * 1000 - size + 1, slide):
                    values = [of(k, s) for s in range(start // 1000, (start + size) // 1000)]
                    mean = sum(values) / len(values)
                    stddev = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
                    lines.append(
                        f"aggregate,quantity={quantity},thing={thing},window={window} "
                        f"count={len(values)}i,"
                        f"mean={mean},min={min(values)},max={max(values)},stddev={stddev},"
                        f"window_end_ms={t0_ms + start + size}i {(t0_ms + start) * 1_000_000}"
                    )
        # sessions: 20 s running, 10 s stopped
        for start, (quantity, of) in itertools.product(
            range(0, SECONDS * 1000, 30_000), (("actSpeed_C11", speed), ("vaTorque_C11", torque))
        ):
            values = [of(k, s) for s in range(start // 1000, start // 1000 + 20)]
            lines.append(
                f"aggregate,quantity={quantity},thing={thing},window={SESSIONS} count=20i,"
                f"mean={sum(values) / 20},min={min(values)},max={max(values)},"
                f"window_end_ms={t0_ms + start + 19_000}i,duration_ms=19000i "
                f"{(t0_ms + start) * 1_000_000}"
            )
    return lines


def late_and_dead_letter_lines(t0_ms: int) -> list[str]:
    """measurements late (count always 1) and dead_letter (time plus offset discriminator)."""
    late_ms = t0_ms + 5_000
    behind = (
        "late,quantity=actSpeed_C11,reason=behind_watermark,stage=aggregate,thing=Thing1 "
        f"value=1234.5,watermark_ms={late_ms + 60_000}i,count=1i {late_ms * 1_000_000}"
    )
    late = (
        "late,quantity=vaTorque_C11,reason=late,stage=join,thing=Thing2 value=21.5,count=1i "
        f"{late_ms * 1_000_000}"
    )
    not_json = (
        "dead_letter,partition=0,reason=not_json,source=mqtt bytes=17i,"
        'detail="payload is neither JSON nor a Python-style dict",count=1i '
        f"{(t0_ms + 30_000) * 1_000_000 + 41}"
    )
    bad_time = (
        "dead_letter,partition=2,reason=bad_timestamp,source=mqtt bytes=88i,"
        "detail=\"Timestamp 'x' is neither a number nor ISO-8601\",count=1i "
        f"{(t0_ms + 31_000) * 1_000_000 + 7}"
    )
    return [behind, late, not_json, bad_time]


COMPONENTS = ("C11", "C12")
BANDS = ("0-20", "20-40", "40-60", "60-80", "80-100", "over-100")


def opstats_lines(t0_ms: int) -> list[str]:
    """measurements opstats and opstats_band: cycle records of a minute per Thing and component,
    made into points by the connector's own converter (docs/influxdb-schema.md)."""
    convert, codec, lines = opstats_converter(), AvroCodec("opstats"), []
    for k, thing in enumerate(THINGS):
        for c, component in enumerate(COMPONENTS):
            cumulative = [0] * len(BANDS)
            for n in range(SECONDS // 60):
                band_ms = [20_000 - 5_000 * c, 10_000, 5_000, 5_000, 5_000 + 5_000 * n, k * 5_000]
                cumulative = [a + b for a, b in zip(cumulative, band_ms, strict=True)]
                data_ms = sum(band_ms)
                record = {
                    "thing": thing,
                    "component": component,
                    "power_name": "mechanical_power",
                    "rating_id": "bd1d59788ba94501",
                    "cycle_start_ms": t0_ms + n * 60_000,
                    "cycle_end_ms": t0_ms + (n + 1) * 60_000,
                    "rated_power_kw": 20.0,
                    "duty_rating_pct": 40.0,
                    "rating_defaulted": True,
                    "band_names": list(BANDS),
                    "band_ms": band_ms,
                    "cumulative_ms": cumulative,
                    "data_ms": data_ms,
                    "duty_pct": 100.0 * (band_ms[-2] + band_ms[-1]) / data_ms,
                    "motoring_kwh": 0.05 * (k + 1),
                    "regenerative_kwh": 0.01 * c,
                    "mean_w": 9_000.0 + 1_000 * k,
                    "peak_w": 21_000.0 + 500 * c,
                }
                lines += convert(as_message(codec.encode(record), n)).splitlines()
    return lines


def as_message(value: bytes, offset: int) -> Message:
    """A record as the connector's converters receive it from Kafka."""
    return Message(topic="t", partition=0, offset=offset, key=b"k", value=value, timestamp=(1, 0))


def write_lines(settings: Settings, database: str, lines: list[str]) -> None:
    assert InfluxClient(settings).write(database, lines) == 204


@pytest.fixture(scope="module")
def dashboard_db(stack_settings: Settings) -> Iterator[tuple[str, int, int]]:
    """A private database with the data set; yields (name, from_ms, to_ms) covering it."""
    influx = InfluxClient(stack_settings)
    name = f"dashboards_{uuid.uuid4().hex[:10]}"
    influx.create_scratch_database(name)
    try:
        now_ms = int(time.time() * 1000)
        t0_ms = (now_ms - 20 * 60_000) // 60_000 * 60_000
        write_lines(
            stack_settings,
            name,
            raw_lines(t0_ms)
            + joined_lines(t0_ms)
            + aggregate_lines(t0_ms)
            + late_and_dead_letter_lines(t0_ms)
            + opstats_lines(t0_ms)
            + overload_lines(t0_ms),
        )
        yield name, t0_ms - 10 * 60_000, now_ms
    finally:
        influx.query(f'DROP DATABASE "{name}"')


def overload_lines(t0_ms: int) -> list[str]:
    """measurement overload: each Thing's spindle fires an alert and resolves it two cycles
    later, made into points by the connector's converter (the dashboard's annotations)."""
    convert, codec, lines = overload_converter(), AvroCodec("overload"), []
    for thing in THINGS:
        for n, status in enumerate(("firing", "resolved")):
            event = {
                "thing": thing,
                "component": COMPONENTS[0],
                "rating_id": "bd1d59788ba94501",
                "status": status,
                "since_ms": t0_ms,
                "cycle_start_ms": t0_ms + n * 120_000,
                "cycle_end_ms": t0_ms + n * 120_000 + 60_000,
                "why": "duty" if status == "firing" else "",
                "duty_pct": 75.0 if status == "firing" else 25.0,
                "duty_rating_pct": 40.0,
                "overload_ms": 0,
                "peak_w": 19_000.0,
                "rated_power_kw": 20.0,
            }
            lines += convert(as_message(codec.encode(event), n)).splitlines()
    return lines


def by_datasource(results: list[PanelResult], uid: str) -> list[PanelResult]:
    return [r for r in results if r.datasource == uid]


def describe(results: list[PanelResult]) -> str:
    return "\n".join(
        f"{r.dashboard} | {r.panel} {r.ref_id} | series={r.series} error={r.error} | {r.query}"
        for r in results
    )


def influx_targets() -> set[tuple[str, int, str]]:
    """(dashboard, panel id, refId) of every InfluxDB target the dashboards ship."""
    datasources = load_datasources()
    found = set()
    for dashboard in load_dashboards():
        for panel in dashboard.model["panels"]:
            for target in panel.get("targets") or []:
                uid = target.get("datasource", panel.get("datasource"))["uid"]
                if datasources[uid].type == "influxdb":
                    found.add((dashboard.title, panel["id"], target["refId"]))
    return found


def test_every_query_runs_and_influx_queries_return_data(
    stack_settings: Settings, dashboard_db: tuple[str, int, int]
) -> None:
    database, from_ms, to_ms = dashboard_db
    results = check_dashboards(
        DashboardSettings.of(stack_settings), from_ms, to_ms, {}, database=database
    )

    errors = [r for r in results if r.error]
    assert not errors, "queries failed:\n" + describe(errors)
    influx = by_datasource(results, "influxdb")
    empty = [r for r in influx if r.series == 0 or r.points == 0]
    assert not empty, "InfluxDB queries without data:\n" + describe(empty)
    assert {
        (r.dashboard, r.panel_id, r.ref_id) for r in influx if r.kind == "panel"
    } == influx_targets()
    variables = {(r.dashboard, r.panel) for r in influx if r.kind == "variable"}
    annotations = [(r.dashboard, r.panel, r.points) for r in influx if r.kind == "annotation"]
    assert annotations == [("Operation statistics", "annotation Overload alerts", 2)], annotations
    assert ("Machine data", "variable thing") in variables and (
        "Joined power",
        "variable left",
    ) in variables
    assert by_datasource(results, "prometheus"), (
        "the pipeline-health dashboard has Prometheus panels"
    )
    unfilled = [r for r in results if variable_references(r.query)]
    assert not unfilled, "macros or variables left in:\n" + describe(unfilled)


def test_variables_and_repeats_resolve_like_grafana(
    stack_settings: Settings, dashboard_db: tuple[str, int, int]
) -> None:
    database, from_ms, to_ms = dashboard_db
    results = check_dashboards(
        DashboardSettings.of(stack_settings), from_ms, to_ms, {"thing": "Thing2"}, database=database
    )

    # Machine data repeats its quantity panel once per quantity of the pinned Thing.
    repeated = [r for r in results if r.dashboard == "Machine data" and r.panel_id == 2]
    assert sorted(r.panel for r in repeated) == sorted(QUANTITIES)
    assert all(r.series == 1 and r.points > 0 and "Thing2" in r.query for r in repeated), describe(
        repeated
    )
    # Joined power derives its hidden left/right inputs from the pair tag with a variable regex.
    raw_inputs = [r for r in results if r.dashboard == "Joined power" and r.panel_id == 3]
    assert {r.panel for r in raw_inputs} == {"Raw inputs: actSpeed_C11 and vaTorque_C11"}
    assert all(r.points > 0 for r in raw_inputs), describe(raw_inputs)
    # Window aggregates repeats its row per window and the band panel per quantity inside it.
    bands = [r for r in results if r.dashboard == "Window aggregates" and r.panel_id == 3]
    assert sorted(r.panel for r in bands) == sorted(
        f"{q} ({w})" for q in QUANTITIES[:2] for w in [*WINDOWS, SESSIONS]
    )
    assert all(r.points > 0 for r in bands), describe(bands)
    # Operation statistics repeats its gauges per component of the pinned Thing.
    gauges = [r for r in results if r.dashboard == "Operation statistics" and r.panel_id in (1, 2)]
    assert sorted(r.panel for r in gauges if r.ref_id == "A") == sorted(
        f"{title} {c}{rest}"
        for c in COMPONENTS
        for title, rest in (("Load spectrum", " (hours per band)"), ("Duty cycle", ", last cycle"))
    )
    assert all(r.points > 0 and "Thing2" in r.query for r in gauges), describe(gauges)


def test_fault_only_counters_return_an_explicit_zero(
    stack_settings: Settings, dashboard_db: tuple[str, int, int]
) -> None:
    """The dropped/rejected/dead-lettered panel has data even when nothing went wrong (or no
    service has run at all): each target falls back to a 0 series instead of "No data"."""
    database, from_ms, to_ms = dashboard_db
    health = [d for d in load_dashboards() if d.model["uid"] == "machinedata-health"]
    results = check_dashboards(
        DashboardSettings.of(stack_settings), from_ms, to_ms, database=database, dashboards=health
    )
    counters = [r for r in results if r.panel_id == 14]
    assert [r.ref_id for r in counters] == list("ABCDEFGH")
    assert all(r.ok and r.series >= 1 and r.points > 0 for r in counters), describe(counters)
