"""The provisioned Grafana dashboards: structure, macro filling and interval arithmetic (no stack)."""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from streamkit.dashboards import (
    SCHEMA_VERSION,
    Dashboard,
    Selection,
    TimeRange,
    apply_variable_regex,
    builtin_values,
    calculate_interval_ms,
    default_selection,
    expand_panels,
    fill_query,
    format_duration,
    format_variable,
    interpolate,
    iter_panels,
    load_dashboards,
    load_datasources,
    main,
    max_data_points,
    rate_interval_ms,
    round_interval_ms,
    validate_dashboard,
    validate_dashboards,
)

DATASOURCES = load_datasources()
DASHBOARDS = {d.path.name: d for d in load_dashboards()}
HOUR = TimeRange(1_700_000_000_000, 1_700_003_600_000)


def model(name: str) -> dict[str, Any]:
    return copy.deepcopy(DASHBOARDS[name].model)


def panel(m: dict[str, Any], panel_id: int) -> dict[str, Any]:
    return next(p for p, _ in iter_panels(m) if p.get("id") == panel_id)


# ------------------------------------------------------------------------------------ shipped files
def test_the_four_dashboards_are_shipped_with_stable_uids() -> None:
    uids = {name: d.model["uid"] for name, d in DASHBOARDS.items()}
    assert uids == {"machine-data.json": "machinedata-raw", "joined-power.json": "machinedata-joined",
                    "window-aggregates.json": "machinedata-windows", "pipeline-health.json": "machinedata-health"}
    assert {d.model["schemaVersion"] for d in DASHBOARDS.values()} == {SCHEMA_VERSION} == {41}


def test_every_shipped_dashboard_passes_the_structural_check() -> None:
    assert validate_dashboards(list(DASHBOARDS.values()), DATASOURCES) == []


def test_datasources_come_from_provisioning() -> None:
    assert {uid: (d.type, d.time_interval_ms) for uid, d in DATASOURCES.items()} == {
        "influxdb": ("influxdb", 1000), "prometheus": ("prometheus", 5000)}


def test_data_panels_are_timeseries_with_units_and_use_rate_interval() -> None:
    for dashboard in DASHBOARDS.values():
        for p, _ in iter_panels(dashboard.model):
            if p["type"] == "row":
                continue
            assert p["type"] == "timeseries" and p["fieldConfig"]["defaults"].get("unit"), p["title"]
            for target in p["targets"]:
                if "rate(" in target.get("expr", ""):
                    assert "[$__rate_interval]" in target["expr"], target["expr"]


def test_cli_validate_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate"]) == 0
    assert "4 dashboards, 0 problems" in capsys.readouterr().out


# ------------------------------------------------------------------------------------ broken variants
def test_missing_grid_position_is_reported() -> None:
    m = model("machine-data.json")
    del panel(m, 2)["gridPos"]
    assert validate_dashboard(m, DATASOURCES) == ["panel 2 '$quantity': missing gridPos"]


def test_unknown_datasource_uid_is_reported() -> None:
    m = model("pipeline-health.json")
    panel(m, 3)["datasource"] = {"type": "prometheus", "uid": "prom-old"}
    problems = validate_dashboard(m, DATASOURCES)
    assert problems == [("panel 3 'Ingest: simulator and MQTT bridge': unknown datasource uid 'prom-old' "
                        "(provisioned: ['influxdb', 'prometheus'])")]


def test_target_datasource_of_the_wrong_type_is_reported() -> None:
    m = model("pipeline-health.json")
    panel(m, 15)["targets"][0]["datasource"] = {"type": "prometheus", "uid": "influxdb"}
    assert any("datasource 'influxdb' is of type 'influxdb', not 'prometheus'" in p
               for p in validate_dashboard(m, DATASOURCES))


def test_duplicate_panel_id_is_reported() -> None:
    m = model("joined-power.json")
    panel(m, 4)["id"] = 1
    assert "duplicate panel id 1" in validate_dashboard(m, DATASOURCES)


def test_undefined_variable_in_a_query_is_reported() -> None:
    m = model("machine-data.json")
    target = panel(m, 2)["targets"][0]
    target["query"] = target["query"].replace("$thing", "$machine")
    assert validate_dashboard(m, DATASOURCES) == ["panel 2 '$quantity' target A: undefined variable $machine"]


def test_variable_using_a_later_variable_is_reported() -> None:
    m = model("machine-data.json")
    m["templating"]["list"].reverse()  # quantity (which uses $thing) now comes first
    assert validate_dashboard(m, DATASOURCES) == ["variable 'quantity': undefined variable $thing"]


def test_repeat_must_refer_to_an_existing_multi_value_variable() -> None:
    m = model("machine-data.json")
    panel(m, 2)["repeat"] = "quantities"
    assert "panel 2 '$quantity': repeat refers to undefined variable 'quantities'" in validate_dashboard(m, DATASOURCES)
    m = model("joined-power.json")
    panel(m, 1)["repeat"] = "thing"
    assert ("panel 1 '$result': repeat variable 'thing' allows one value only (set multi or includeAll)"
            in validate_dashboard(m, DATASOURCES))


def test_targets_need_ref_id_and_query() -> None:
    m = model("pipeline-health.json")
    targets = panel(m, 10)["targets"]
    targets[0]["expr"] = ""
    targets[1]["refId"] = "A"
    del targets[2]["refId"]
    panel(m, 16)["targets"][0]["rawQuery"] = False
    problems = validate_dashboard(m, DATASOURCES)
    assert "panel 10 'Batch durations (p50 / p95)': duplicate refId 'A'" in problems
    assert "panel 10 'Batch durations (p50 / p95)': target without refId" in problems
    assert "panel 10 'Batch durations (p50 / p95)' target A: no query (expr is empty)" in problems
    assert ("panel 16 'Dead letters (InfluxDB)' target A: InfluxQL targets must be raw queries (rawQuery: true)"
            in problems)


def test_top_level_problems() -> None:
    m = model("window-aggregates.json")
    m["schemaVersion"] = 39
    m["id"] = 7
    del m["templating"]
    problems = validate_dashboard(m, DATASOURCES)
    assert "missing top-level key 'templating'" in problems
    assert "schemaVersion is 39, Grafana 11.6 uses 41" in problems
    assert "id must be null in a provisioned dashboard (Grafana assigns it)" in problems


def test_grid_outside_and_overlapping_panels_are_reported() -> None:
    m = model("joined-power.json")
    panel(m, 3)["gridPos"] = {"h": 8, "w": 12, "x": 14, "y": 8}
    assert any(p.startswith("panel 3 'Raw inputs: $left and $right': gridPos") and "outside" in p
               for p in validate_dashboard(m, DATASOURCES))
    panel(m, 3)["gridPos"] = {"h": 8, "w": 12, "x": 6, "y": 8}
    panel(m, 3)["gridPos"]["x"] = 4
    assert any(p.startswith("panels 2 and 3 overlap") for p in validate_dashboard(m, DATASOURCES))


def test_uid_used_by_two_files_is_reported() -> None:
    first = DASHBOARDS["machine-data.json"]
    twin = copy.deepcopy(first.model) | {"title": "Machine data (copy)"}
    problems = validate_dashboards([first, Dashboard(Path("copy.json"), twin)], DATASOURCES)
    assert problems == ["uid 'machinedata-raw' is used by machine-data.json, copy.json"]


# ------------------------------------------------------------------------------------ intervals
@pytest.mark.parametrize(("range_ms", "points", "low_ms", "expected_ms"), [
    (3_600_000, 1000, 1000, 5_000),        # 3.6 s raw -> 5 s
    (3_600_000, 1920, 1000, 2_000),        # 1.875 s -> 2 s
    (300_000, 1000, 1000, 1_000),          # 300 ms -> 200 ms, but the datasource says at least 1 s
    (300_000, 1000, 5000, 5_000),          # Prometheus: never below the scrape interval
    (86_400_000, 1000, 1000, 60_000),      # 86.4 s -> 1 m
    (7 * 86_400_000, 960, 1000, 600_000),  # 630 s -> 10 m
    (30 * 86_400_000, 1000, 1000, 1_800_000),  # 43.2 m -> 30 m
])
def test_interval_like_grafana(range_ms: int, points: int, low_ms: int, expected_ms: int) -> None:
    assert calculate_interval_ms(range_ms, points, low_ms) == expected_ms


def test_round_interval_and_duration_text() -> None:
    assert [round_interval_ms(ms) for ms in (1, 14, 16, 740, 760, 44_000, 46_000, 10**12)] == [
        10, 10, 20, 500, 1_000, 30_000, 60_000, 31_536_000_000]
    assert [format_duration(ms) for ms in (500, 1_500, 5_000, 60_000, 90_000, 3_600_000, 604_800_000)] == [
        "500ms", "1s", "5s", "1m", "1m", "1h", "7d"]


def test_rate_interval_is_at_least_four_scrapes() -> None:
    assert rate_interval_ms(5_000, 5_000) == 20_000
    assert rate_interval_ms(60_000, 5_000) == 65_000


def test_max_data_points_follow_the_panel_width() -> None:
    assert max_data_points({"gridPos": {"w": 24}}) == 1920
    assert max_data_points({"gridPos": {"w": 12}}) == 960
    assert max_data_points({"gridPos": {"w": 12}, "maxDataPoints": 300}) == 300


# ------------------------------------------------------------------------------------ macros
def test_influxql_macros_are_filled_exactly() -> None:
    query = ('SELECT mean("value") FROM "raw" WHERE "thing" =~ /^$thing$/ AND "quantity" =~ /^$quantity$/ '
             'AND $timeFilter GROUP BY time($__interval), "thing" fill(none)')
    filled = fill_query(query, HOUR, 5_000, 1_000, {"thing": "(Thing1|Thing2)", "quantity": "actSpeed_C11"})
    assert filled == ('SELECT mean("value") FROM "raw" WHERE "thing" =~ /^(Thing1|Thing2)$/ AND "quantity" =~ '
                      '/^actSpeed_C11$/ AND time >= 1700000000000ms and time <= 1700003600000ms '
                      'GROUP BY time(5s), "thing" fill(none)')


def test_promql_macros_are_filled_exactly() -> None:
    expr = "sum by (query) (rate(spark_input_rows_total[$__rate_interval])) / $__interval_ms * ${__range_s}"
    assert fill_query(expr, HOUR, 5_000, 5_000, {}, "prometheus") == (
        "sum by (query) (rate(spark_input_rows_total[20s])) / 5000 * 3600")
    assert fill_query("rate(x[$__rate_interval])", HOUR, 60_000, 5_000, {}, "prometheus") == "rate(x[65s])"


def test_all_builtin_values() -> None:
    assert builtin_values(HOUR, 2_000, 1_000) == {
        "timeFilter": "time >= 1700000000000ms and time <= 1700003600000ms",
        "__timeFilter": "time >= 1700000000000ms and time <= 1700003600000ms",
        "__interval": "2s", "interval": "2s", "__interval_ms": "2000",
        "__rate_interval": "4s", "__rate_interval_ms": "4000",
        "__from": "1700000000000", "__to": "1700003600000",
        "__range": "3600s", "__range_s": "3600", "__range_ms": "3600000",
    }


def test_interpolate_knows_every_syntax_and_leaves_unknown_names() -> None:
    values = {"thing": "Thing1", "__interval": "1m"}
    assert interpolate("$thing ${thing} ${thing:regex} [[thing]] $other time($__interval)", values) == (
        "Thing1 Thing1 Thing1 Thing1 $other time(1m)")


@pytest.mark.parametrize(("variable", "selection", "expected"), [
    ({"multi": True}, Selection(("Thing1", "Thing2")), "(Thing1|Thing2)"),
    ({"multi": True}, Selection(("Thing1",)), "Thing1"),
    ({"includeAll": True}, Selection((), True, ("a", "b", "c")), "(a|b|c)"),
    ({"includeAll": True, "allValue": ".*"}, Selection((), True, ("a", "b")), ".*"),
    ({"multi": True}, Selection(("a.b/c", "d")), r"(a\.b\/c|d)"),
    ({"multi": False}, Selection(("tumbling-60000",)), "tumbling-60000"),
    ({"multi": True}, Selection(()), ""),
])
def test_variable_formatting(variable: dict[str, Any], selection: Selection, expected: str) -> None:
    assert format_variable(selection, variable) == expected


def test_variable_regex_extracts_the_capture_group() -> None:
    pairs = ["actSpeed_C11:vaTorque_C11", "actSpeed_C11:vaTorque_C12"]
    assert apply_variable_regex(pairs, "/^([^:]+):/") == ["actSpeed_C11"]
    assert apply_variable_regex(pairs, "/^[^:]+:(.+)$/") == ["vaTorque_C11", "vaTorque_C12"]
    assert apply_variable_regex(pairs, "/C12$/") == ["actSpeed_C11:vaTorque_C12"]


def test_default_selection_like_grafana() -> None:
    options = ["Thing1", "Thing2"]
    assert default_selection({"includeAll": True, "current": {"value": ["$__all"]}}, options).effective() == (
        "Thing1", "Thing2")
    assert default_selection({"multi": False}, options).values == ("Thing1",)
    assert default_selection({"current": {"value": "Thing2"}}, options).values == ("Thing2",)
    assert default_selection({"current": {"value": "gone"}}, options).values == ("Thing1",)


def test_repeated_rows_and_panels_are_expanded_per_value() -> None:
    dashboard = DASHBOARDS["window-aggregates.json"]
    selections = {"thing": Selection(("Thing1",)), "quantity": Selection((), True, ("q1", "q2", "q3")),
                  "window": Selection(("tumbling-60000", "sliding-60000-30000"))}
    expanded = [(p["id"], s["window"].values, s["quantity"].effective()) for p, s in expand_panels(dashboard, selections)]
    assert [e for e in expanded if e[0] == 2] == [(2, ("tumbling-60000",), ("q1", "q2", "q3")),
                                                  (2, ("sliding-60000-30000",), ("q1", "q2", "q3"))]
    assert len([e for e in expanded if e[0] == 3]) == 6
