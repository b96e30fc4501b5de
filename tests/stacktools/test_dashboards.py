"""The provisioned Grafana dashboards: structure, macro filling and interval arithmetic (no
stack)."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest

from stacktools.dashboards import (
    SCHEMA_VERSION,
    Dashboard,
    Selection,
    TimeRange,
    expand_panels,
    iter_panels,
    load_dashboards,
    load_datasources,
    main,
    validate_dashboard,
    validate_dashboards,
)
from stacktools.dashboards.intervals import format_interval, round_interval_ms
from stacktools.dashboards.macros import (
    builtin_values,
    calculate_interval_ms,
    fill_query,
    format_variable,
    interpolate,
    max_data_points,
    rate_interval_ms,
)
from stacktools.dashboards.variables import apply_variable_regex, default_selection

DATASOURCES = load_datasources()
DASHBOARDS = {d.path.name: d for d in load_dashboards()}
HOUR = TimeRange(1_700_000_000_000, 1_700_003_600_000)


def model(name: str) -> dict[str, Any]:
    return copy.deepcopy(DASHBOARDS[name].model)


def panel(m: dict[str, Any], panel_id: int) -> dict[str, Any]:
    return next(p for p, _ in iter_panels(m) if p.get("id") == panel_id)


# ------------------------------------------------------------------------------------ shipped files
def test_the_five_dashboards_are_shipped_with_stable_uids() -> None:
    uids = {name: d.model["uid"] for name, d in DASHBOARDS.items()}
    assert uids == {
        "machine-data.json": "machinedata-raw",
        "joined-power.json": "machinedata-joined",
        "window-aggregates.json": "machinedata-windows",
        "pipeline-health.json": "machinedata-health",
        "operation-statistics.json": "machinedata-opstats",
    }
    assert {d.model["schemaVersion"] for d in DASHBOARDS.values()} == {SCHEMA_VERSION} == {41}


def test_every_shipped_dashboard_passes_the_structural_check() -> None:
    assert validate_dashboards(list(DASHBOARDS.values()), DATASOURCES) == []


def test_datasources_come_from_provisioning() -> None:
    assert {uid: (d.type, d.time_interval_ms) for uid, d in DATASOURCES.items()} == {
        "influxdb": ("influxdb", 1000),
        "prometheus": ("prometheus", 5000),
    }


#: Panel types besides timeseries, and why: the pipeline graph is a picture of one instant (the
#: node graph draws the last value of each field), not a series over time; its figures are in
#: different units per node, so its subtitle names them instead of a field unit. A component's
#: load spectrum and last duty cycle are gauges: where it stands, against its bands and rating.
NON_TIMESERIES = {("pipeline-health.json", "nodeGraph")}
GAUGES = {("operation-statistics.json", "bargauge"), ("operation-statistics.json", "gauge")}


def test_data_panels_are_timeseries_with_units_and_use_rate_interval() -> None:
    for name, dashboard in DASHBOARDS.items():
        for p, _ in iter_panels(dashboard.model):
            if p["type"] == "row":
                continue
            if (name, p["type"]) in NON_TIMESERIES:
                assert all(t.get("instant") and not t.get("range") for t in p["targets"]), p
            elif (name, p["type"]) in GAUGES:
                assert p["fieldConfig"]["defaults"].get("unit") and p.get("repeat"), p["title"]
            else:
                assert p["type"] == "timeseries" and p["fieldConfig"]["defaults"].get("unit"), p[
                    "title"
                ]
            for target in p["targets"]:
                if "rate(" in target.get("expr", ""):
                    assert "[$__rate_interval]" in target["expr"], target["expr"]


def test_cli_validate_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate"]) == 0
    assert "5 dashboards, 0 problems" in capsys.readouterr().out


# ---------------------------------------------------------------------------------- broken variants
def test_missing_grid_position_is_reported() -> None:
    m = model("machine-data.json")
    del panel(m, 2)["gridPos"]
    assert validate_dashboard(m, DATASOURCES) == ["panel 2 '$quantity': missing gridPos"]


def test_unknown_datasource_uid_is_reported() -> None:
    m = model("pipeline-health.json")
    panel(m, 3)["datasource"] = {"type": "prometheus", "uid": "prom-old"}
    problems = validate_dashboard(m, DATASOURCES)
    assert problems == [
        (
            "panel 3 'Ingest: simulator and MQTT bridge': unknown datasource uid 'prom-old' "
            "(provisioned: ['influxdb', 'prometheus'])"
        )
    ]


def test_target_datasource_of_the_wrong_type_is_reported() -> None:
    m = model("pipeline-health.json")
    panel(m, 15)["targets"][0]["datasource"] = {"type": "prometheus", "uid": "influxdb"}
    assert any(
        "datasource 'influxdb' is of type 'influxdb', not 'prometheus'" in p
        for p in validate_dashboard(m, DATASOURCES)
    )


def test_duplicate_panel_id_is_reported() -> None:
    m = model("joined-power.json")
    panel(m, 4)["id"] = 1
    assert "duplicate panel id 1" in validate_dashboard(m, DATASOURCES)


def test_undefined_variable_in_a_query_is_reported() -> None:
    m = model("machine-data.json")
    target = panel(m, 2)["targets"][0]
    target["query"] = target["query"].replace("$thing", "$machine")
    assert validate_dashboard(m, DATASOURCES) == [
        "panel 2 '$quantity' target A: undefined variable $machine"
    ]


def test_variable_using_a_later_variable_is_reported() -> None:
    m = model("machine-data.json")
    m["templating"]["list"].reverse()  # quantity (which uses $thing) now comes first
    assert validate_dashboard(m, DATASOURCES) == ["variable 'quantity': undefined variable $thing"]


def test_repeat_must_refer_to_an_existing_multi_value_variable() -> None:
    m = model("machine-data.json")
    panel(m, 2)["repeat"] = "quantities"
    assert (
        "panel 2 '$quantity': repeat refers to undefined variable 'quantities'"
        in validate_dashboard(m, DATASOURCES)
    )
    m = model("joined-power.json")
    panel(m, 1)["repeat"] = "thing"
    assert (
        "panel 1 '$result': repeat variable 'thing' allows one value only (set multi or includeAll)"
        in validate_dashboard(m, DATASOURCES)
    )


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
    assert (
        "panel 16 'Dead letters (InfluxDB)' target A: InfluxQL targets must be raw queries "
        "(rawQuery: true)" in problems
    )


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
    assert any(
        p.startswith("panel 3 'Raw inputs: $left and $right': gridPos") and "outside" in p
        for p in validate_dashboard(m, DATASOURCES)
    )
    panel(m, 3)["gridPos"] = {"h": 8, "w": 12, "x": 6, "y": 8}
    panel(m, 3)["gridPos"]["x"] = 4
    assert any(p.startswith("panels 2 and 3 overlap") for p in validate_dashboard(m, DATASOURCES))


def test_uid_used_by_two_files_is_reported() -> None:
    first = DASHBOARDS["machine-data.json"]
    twin = copy.deepcopy(first.model) | {"title": "Machine data (copy)"}
    problems = validate_dashboards([first, Dashboard(Path("copy.json"), twin)], DATASOURCES)
    assert problems == ["uid 'machinedata-raw' is used by machine-data.json, copy.json"]


# ------------------------------------------------------------------------------------ intervals
@pytest.mark.parametrize(
    ("range_ms", "points", "low_ms", "expected_ms"),
    [
        (3_600_000, 1000, 1000, 5_000),  # 3.6 s raw -> 5 s
        (3_600_000, 1920, 1000, 2_000),  # 1.875 s -> 2 s
        (300_000, 1000, 1000, 1_000),  # 300 ms -> 200 ms, but the datasource says at least 1 s
        (300_000, 1000, 5000, 5_000),  # Prometheus: never below the scrape interval
        (86_400_000, 1000, 1000, 60_000),  # 86.4 s -> 1 m
        (7 * 86_400_000, 960, 1000, 600_000),  # 630 s -> 10 m
        (30 * 86_400_000, 1000, 1000, 1_800_000),  # 43.2 m -> 30 m
    ],
)
def test_interval_like_grafana(range_ms: int, points: int, low_ms: int, expected_ms: int) -> None:
    assert calculate_interval_ms(range_ms, points, low_ms) == expected_ms


def test_round_interval_and_duration_text() -> None:
    assert [round_interval_ms(ms) for ms in (1, 14, 16, 740, 760, 44_000, 46_000, 10**12)] == [
        10,
        10,
        20,
        500,
        1_000,
        30_000,
        60_000,
        31_536_000_000,
    ]
    assert [
        format_interval(ms) for ms in (500, 1_500, 5_000, 60_000, 90_000, 3_600_000, 604_800_000)
    ] == ["500ms", "1s", "5s", "1m", "1m", "1h", "7d"]


def test_rate_interval_is_at_least_four_scrapes() -> None:
    assert rate_interval_ms(5_000, 5_000) == 20_000
    assert rate_interval_ms(60_000, 5_000) == 65_000


def test_max_data_points_follow_the_panel_width() -> None:
    assert max_data_points({"gridPos": {"w": 24}}) == 1920
    assert max_data_points({"gridPos": {"w": 12}}) == 960
    assert max_data_points({"gridPos": {"w": 12}, "maxDataPoints": 300}) == 300


# ------------------------------------------------------------------------------------ macros
def test_influxql_macros_are_filled_exactly() -> None:
    query = (
        'SELECT mean("value") FROM "raw" WHERE "thing" =~ /^$thing$/ AND "quantity" =~ '
        '/^$quantity$/ AND $timeFilter GROUP BY time($__interval), "thing" fill(none)'
    )
    filled = fill_query(
        query, HOUR, 5_000, 1_000, {"thing": "(Thing1|Thing2)", "quantity": "actSpeed_C11"}
    )
    assert filled == (
        'SELECT mean("value") FROM "raw" WHERE "thing" =~ /^(Thing1|Thing2)$/ AND "quantity" =~ '
        "/^actSpeed_C11$/ AND time >= 1700000000000ms and time <= 1700003600000ms "
        'GROUP BY time(5s), "thing" fill(none)'
    )


def test_promql_macros_are_filled_exactly() -> None:
    expr = (
        "sum by (query) (rate(spark_input_rows_total[$__rate_interval])) / $__interval_ms * "
        "${__range_s}"
    )
    assert fill_query(expr, HOUR, 5_000, 5_000, {}, "prometheus") == (
        "sum by (query) (rate(spark_input_rows_total[20s])) / 5000 * 3600"
    )
    assert (
        fill_query("rate(x[$__rate_interval])", HOUR, 60_000, 5_000, {}, "prometheus")
        == "rate(x[65s])"
    )


def test_all_builtin_values() -> None:
    assert builtin_values(HOUR, 2_000, 1_000) == {
        "timeFilter": "time >= 1700000000000ms and time <= 1700003600000ms",
        "__timeFilter": "time >= 1700000000000ms and time <= 1700003600000ms",
        "__interval": "2s",
        "interval": "2s",
        "__interval_ms": "2000",
        "__rate_interval": "4s",
        "__rate_interval_ms": "4000",
        "__from": "1700000000000",
        "__to": "1700003600000",
        "__range": "3600s",
        "__range_s": "3600",
        "__range_ms": "3600000",
    }


def test_interpolate_knows_every_syntax_and_leaves_unknown_names() -> None:
    values = {"thing": "Thing1", "__interval": "1m"}
    assert interpolate(
        "$thing ${thing} ${thing:regex} [[thing]] $other time($__interval)", values
    ) == ("Thing1 Thing1 Thing1 Thing1 $other time(1m)")


@pytest.mark.parametrize(
    ("variable", "selection", "expected"),
    [
        ({"multi": True}, Selection(("Thing1", "Thing2")), "(Thing1|Thing2)"),
        ({"multi": True}, Selection(("Thing1",)), "Thing1"),
        ({"includeAll": True}, Selection((), True, ("a", "b", "c")), "(a|b|c)"),
        ({"includeAll": True, "allValue": ".*"}, Selection((), True, ("a", "b")), ".*"),
        ({"multi": True}, Selection(("a.b/c", "d")), r"(a\.b\/c|d)"),
        ({"multi": False}, Selection(("tumbling-60000",)), "tumbling-60000"),
        ({"multi": True}, Selection(()), ""),
    ],
)
def test_variable_formatting(variable: dict[str, Any], selection: Selection, expected: str) -> None:
    assert format_variable(selection, variable) == expected


def test_variable_regex_extracts_the_capture_group() -> None:
    pairs = ["actSpeed_C11:vaTorque_C11", "actSpeed_C11:vaTorque_C12"]
    assert apply_variable_regex(pairs, "/^([^:]+):/") == ["actSpeed_C11"]
    assert apply_variable_regex(pairs, "/^[^:]+:(.+)$/") == ["vaTorque_C11", "vaTorque_C12"]
    assert apply_variable_regex(pairs, "/C12$/") == ["actSpeed_C11:vaTorque_C12"]


def test_default_selection_like_grafana() -> None:
    options = ["Thing1", "Thing2"]
    assert default_selection(
        {"includeAll": True, "current": {"value": ["$__all"]}}, options
    ).effective() == ("Thing1", "Thing2")
    assert default_selection({"multi": False}, options).values == ("Thing1",)
    assert default_selection({"current": {"value": "Thing2"}}, options).values == ("Thing2",)
    assert default_selection({"current": {"value": "gone"}}, options).values == ("Thing1",)


def test_repeated_rows_and_panels_are_expanded_per_value() -> None:
    dashboard = DASHBOARDS["window-aggregates.json"]
    selections = {
        "thing": Selection(("Thing1",)),
        "quantity": Selection((), True, ("q1", "q2", "q3")),
        "window": Selection(("tumbling-60000", "sliding-60000-30000")),
    }
    expanded = [
        (p["id"], s["window"].values, s["quantity"].effective())
        for p, s in expand_panels(dashboard, selections)
    ]
    assert [e for e in expanded if e[0] == 2] == [
        (2, ("tumbling-60000",), ("q1", "q2", "q3")),
        (2, ("sliding-60000-30000",), ("q1", "q2", "q3")),
    ]
    assert len([e for e in expanded if e[0] == 3]) == 6


# ------------------------------------------------------------------------------- Prometheus metrics
REPO = Path(__file__).resolve().parents[2]
METRIC_PACKAGES = ("streamkit", "mqtt_bridge", "simulator", "spark_jobs", "db_connector")
#: prometheus_client definitions: Counter("name", "help", ["label", ...], buckets=...), and the
#: metric families of custom collectors: CounterMetricFamily("name", "help", labels=[...]).
METRIC_DEFINITION = re.compile(
    # kind and name
    r"\b(Counter|Gauge|Histogram|Summary|CounterMetricFamily|GaugeMetricFamily)"
    r"\(\s*([\"'])([a-zA-Z_:][\w:]*)\2\s*,"
    r"(?:\s*(?:\"[^\"]*\"|'[^']*'))+"  # help (maybe concatenated)
    # label names, if any
    r"(?:\s*,\s*(?:label(?:name)?s\s*=\s*)?[\[(]([^\])]*)[\])])?"
)
#: Labels Prometheus attaches to every scraped series (the stack's scrape config adds "service").
TARGET_LABELS = frozenset({"job", "instance", "service"})
#: Series Prometheus writes itself: ``up`` for every scrape target, ``ALERTS`` for every alert of
#: prometheus/alerts.yml that is pending or firing (the rules' labels and output labels).
SYNTHETIC_METRICS = {
    "up": frozenset[str](),
    "ALERTS": frozenset({"alertname", "alertstate", "severity", "query", "reason", "topic"}),
}
PROMQL_KEYWORDS = frozenset(
    {
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "and",
        "or",
        "unless",
        "bool",
        "offset",
        "inf",
        "nan",
    }
)
#: Counters whose series appear only once something went wrong: a healthy run never creates them.
FAULT_ONLY_METRICS = frozenset(
    {
        "spark_rows_dropped_by_watermark_total",
        "simulator_rows_rejected_total",
        "bridge_dlq_total",
        "connector_dead_letters_total",
        "connector_rejected_points_total",
        "connector_expired_points_total",
        "connector_write_retries_total",
    }
)


def exported_metrics() -> dict[str, frozenset[str]]:
    """Every series name the services export, with its labels, parsed from their source.

    prometheus_client adds suffixes: a counter ``x`` or ``x_total`` is exported as ``x_total``
    (plus ``x_created``), a histogram as ``x_bucket`` (with ``le``), ``x_sum`` and ``x_count``.
    """
    found: dict[str, frozenset[str]] = dict(SYNTHETIC_METRICS)
    for package in METRIC_PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            for kind, _quote, name, labels in METRIC_DEFINITION.findall(path.read_text()):
                names = frozenset(re.findall(r"[\"'](\w+)[\"']", labels or ""))
                if kind == "Counter":
                    base = name.removesuffix("_total")
                    found |= {f"{base}_total": names, f"{base}_created": names}
                elif kind == "CounterMetricFamily":  # no _created: the collector gives none
                    found[f"{name.removesuffix('_total')}_total"] = names
                elif kind in ("Gauge", "GaugeMetricFamily"):
                    found[name] = names
                else:
                    found |= {
                        f"{name}_sum": names,
                        f"{name}_count": names,
                        f"{name}_created": names,
                    }
                    if kind == "Histogram":
                        found[f"{name}_bucket"] = names | {"le"}
                    else:
                        found[name] = names | {"quantile"}
    return found


def promql_parts(expr: str) -> tuple[set[str], set[str]]:
    """(metric names, label names) an expression refers to; functions and keywords excluded."""
    # label values, label_replace args
    text = re.sub(r"\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'", '""', expr)
    text = re.sub(r"\[[^\]]*\]", "", text)  # range and subquery durations
    labels: set[str] = set()
    for match in re.finditer(
        r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)", text
    ):
        labels |= set(re.findall(r"\w+", match.group(1)))
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    for match in re.finditer(r"\{([^}]*)\}", text):
        labels |= set(re.findall(r"([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)", match.group(1)))
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\$\{?\w+\}?", " ", text)  # Grafana macros outside brackets ($__interval_ms)
    names = (
        set(re.findall(r"(?<![\w.:])([a-zA-Z_:][\w:]*)(?![\w:])(?!\s*\()", text)) - PROMQL_KEYWORDS
    )
    return names, labels


def prometheus_targets(panel_type: str | None = None) -> list[tuple[str, dict[str, Any]]]:
    """(where, target) of every Prometheus target the dashboards ship (of one panel type)."""
    found = []
    for dashboard in DASHBOARDS.values():
        for p, _ in iter_panels(dashboard.model):
            if panel_type is not None and p["type"] != panel_type:
                continue
            for target in p.get("targets") or []:
                if (
                    DATASOURCES[target.get("datasource", p.get("datasource"))["uid"]].type
                    == "prometheus"
                ):
                    found.append(
                        (f"{dashboard.path.name} panel {p['id']} {target['refId']}", target)
                    )
    return found


def test_metric_definitions_are_found_in_the_source() -> None:
    metrics = exported_metrics()
    assert metrics["bridge_dlq_total"] == {"reason"}
    assert metrics["eos_phase_seconds_bucket"] == {"query", "phase", "le"}
    assert metrics["connector_batch_seconds_bucket"] == {"le"}
    # a definition over two lines
    assert metrics["spark_rows_dropped_by_watermark_total"] == {"query"}
    assert len(metrics) > 60


def test_promql_parts_skip_functions_keywords_and_macros() -> None:
    expr = (
        'histogram_quantile(0.95, sum by (le, query) (rate(a_bucket{job="x", '
        'phase=~"c|d"}[$__rate_interval]))) / $__interval_ms or on() label_replace(vector(0), '
        '"query", "none", "", "") - time() + b offset 5m'
    )
    assert promql_parts(expr) == ({"a_bucket", "b"}, {"le", "query", "job", "phase"})


def test_prometheus_panels_use_only_metrics_and_labels_the_services_export() -> None:
    metrics = exported_metrics()
    targets = prometheus_targets()
    assert targets
    for where, target in targets:
        names, labels = promql_parts(target["expr"])
        assert names, f"{where}: no metric in {target['expr']!r}"
        unknown = sorted(names - set(metrics))
        assert not unknown, f"{where}: no service exports {unknown} ({target['expr']})"
        known_labels = TARGET_LABELS.union(*(metrics[name] for name in names))
        assert labels <= known_labels, (
            f"{where}: labels {sorted(labels - known_labels)} do not exist"
        )
        legend = set(re.findall(r"\{\{\s*(\w+)\s*\}\}", target.get("legendFormat", "")))
        assert legend <= known_labels, f"{where}: legend uses {sorted(legend - known_labels)}"


def test_fault_only_counters_fall_back_to_an_explicit_zero() -> None:
    """A counter series that only exists after a fault would leave its panel at "No data" in a
    healthy run; the query must return a 0 labelled 'none' under the same label as the breakdown."""
    checked = set()
    for where, target in prometheus_targets("timeseries"):
        names, _ = promql_parts(target["expr"])
        if not names & FAULT_ONLY_METRICS:
            continue
        checked |= names & FAULT_ONLY_METRICS
        match = re.fullmatch(
            r"sum by \((\w+)\) \(rate\((\w+)\[\$__rate_interval\]\)\) "
            r"or on\(\) label_replace\(vector\(0\), \"(\w+)\", \"none\", \"\", \"\"\)",
            target["expr"],
        )
        assert match and match.group(1) == match.group(3), (
            f"{where}: no zero fallback in {target['expr']!r}"
        )
        assert "{{" + match.group(1) + "}}" in target["legendFormat"], where
    assert checked == FAULT_ONLY_METRICS


def test_the_node_graph_sums_fault_only_counters_with_a_zero_fallback() -> None:
    """The pipeline graph shows a count, not a breakdown: each such sum falls back to 0 itself
    (a missing figure would leave its node without the field)."""
    targets = prometheus_targets("nodeGraph")
    assert targets
    for where, target in targets:
        for name in promql_parts(target["expr"])[0] & FAULT_ONLY_METRICS:
            uses = re.findall(rf"{name}\{{[^}}]*\}}\)( or vector\(0\))?", target["expr"])
            assert uses and all(uses), f"{where}: {name} without its zero fallback"


def test_every_histogram_quantile_keeps_the_le_label() -> None:
    """histogram_quantile needs the buckets' `le` after the sum: without it a panel shows
    nothing at all, and the query still runs (so the stack check alone would not notice)."""
    checked = 0
    for where, target in prometheus_targets():
        for match in re.finditer(
            r"histogram_quantile\(\s*[\d.]+\s*,\s*sum by \(([^)]*)\) \(rate\((\w+)\[",
            target["expr"],
        ):
            checked += 1
            assert "le" in re.findall(r"\w+", match.group(1)), f"{where}: {target['expr']}"
            assert match.group(2).endswith("_bucket"), f"{where}: {target['expr']}"
        assert target["expr"].count("histogram_quantile(") == len(
            re.findall(r"histogram_quantile\(\s*[\d.]+\s*,\s*sum by \(", target["expr"])
        ), f"{where}: not a sum by (...)"
    assert checked >= 8  # batch durations, sink phases, bridge latency, end-to-end latency
