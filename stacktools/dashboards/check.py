"""The dry run: every variable, panel and annotation query, filled in and sent to the stack.

Variables are resolved first, in definition order, by running their own queries; then every
panel (repeats expanded) gets its ``$__interval`` and macros like in Grafana's frontend, and
each target's answer is reported as series and points, or as the error the datasource gave.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from stacktools.dashboards.intervals import parse_interval_ms
from stacktools.dashboards.macros import (
    SCREEN_WIDTH_PX,
    calculate_interval_ms,
    fill_query,
    format_variable,
    interpolate,
    max_data_points,
)
from stacktools.dashboards.model import (
    Dashboard,
    Datasource,
    Selection,
    TimeRange,
    expand_panels,
    load_dashboards,
    load_datasources,
    target_query,
    variable_query,
)
from stacktools.dashboards.nodegraph import ModelError, panel_problems
from stacktools.dashboards.queries import (
    QueryError,
    influx_points,
    influx_query,
    influx_values,
    prometheus_instant_series,
    prometheus_query,
    prometheus_variable_values,
)
from stacktools.dashboards.settings import DashboardSettings
from stacktools.dashboards.variables import (
    apply_variable_regex,
    default_selection,
    given_selection,
    sort_options,
)


@dataclasses.dataclass(frozen=True)
class PanelResult:
    """The outcome of one query: a panel target or a template variable's own query."""

    dashboard: str
    panel: str
    ref_id: str
    datasource: str
    query: str
    series: int = 0
    points: int = 0
    error: str | None = None
    kind: str = "panel"  # "panel", "variable" or "annotation"
    panel_id: int | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclasses.dataclass
class _Runner:
    """What every query of one check shares: where to send it and for which time range."""

    settings: DashboardSettings
    database: str
    datasources: Mapping[str, Datasource]
    time_range: TimeRange

    def datasource(self, ref: Any) -> Datasource:
        uid = ref.get("uid") if isinstance(ref, dict) else None
        if not isinstance(uid, str) or uid not in self.datasources:
            raise QueryError(f"unknown datasource {ref!r}")
        return self.datasources[uid]

    def interval_ms(
        self, datasource: Datasource, points: int, panel_interval: str | None = None
    ) -> int:
        low = parse_interval_ms(panel_interval) if panel_interval else datasource.time_interval_ms
        return calculate_interval_ms(self.time_range.range_ms, points, low)

    def fill(
        self, query: str, datasource: Datasource, interval_ms: int, variables: Mapping[str, str]
    ) -> str:
        return fill_query(
            query,
            self.time_range,
            interval_ms,
            datasource.time_interval_ms,
            variables,
            datasource.type,
        )


def _variable_options(
    runner: _Runner,
    variable: Mapping[str, Any],
    text: Mapping[str, str],
    dashboard: str,
    results: list[PanelResult],
) -> list[str]:
    """The options of one variable; a query variable's query is run (and reported) for them."""
    kind = variable.get("type")
    raw = variable_query(variable)
    if kind in {"custom", "interval"}:
        return [part.strip() for part in raw.split(",") if part.strip()]
    if kind in {"constant", "textbox"}:
        return [raw]
    if kind != "query":
        return []
    try:
        datasource = runner.datasource(variable.get("datasource"))
    except QueryError as exc:
        results.append(
            PanelResult(
                dashboard,
                f"variable {variable['name']}",
                "",
                "?",
                raw,
                error=str(exc),
                kind="variable",
            )
        )
        return []
    query = runner.fill(raw, datasource, runner.interval_ms(datasource, SCREEN_WIDTH_PX), text)
    result = PanelResult(
        dashboard, f"variable {variable['name']}", "", datasource.uid, query, kind="variable"
    )
    try:
        if datasource.type == "influxdb":
            series = influx_query(runner.settings, runner.database, query)
            found = influx_values(series)
            result = dataclasses.replace(result, series=len(series), points=len(found))
        else:
            found = prometheus_variable_values(runner.settings, query, runner.time_range)
            result = dataclasses.replace(result, series=1 if found else 0, points=len(found))
    except QueryError as exc:
        found = []
        result = dataclasses.replace(result, error=str(exc))
    results.append(result)
    return sort_options(
        apply_variable_regex(found, str(variable.get("regex") or "")),
        int(variable.get("sort") or 0),
    )


def _resolve_variables(
    runner: _Runner,
    dashboard: Dashboard,
    given: Mapping[str, str | Sequence[str]],
    results: list[PanelResult],
) -> dict[str, Selection]:
    """Every variable's selection, in definition order, so later queries can use earlier ones."""
    selections: dict[str, Selection] = {}
    definitions = dashboard.variables_by_name
    for name, variable in definitions.items():
        text = {n: format_variable(s, definitions[n]) for n, s in selections.items()}
        options = _variable_options(runner, variable, text, dashboard.title, results)
        selections[name] = (
            given_selection(given[name], options)
            if name in given
            else default_selection(variable, options)
        )
    return selections


def _run_target(
    runner: _Runner,
    dashboard: Dashboard,
    panel: Mapping[str, Any],
    target: Mapping[str, Any],
    text: Mapping[str, str],
) -> PanelResult:
    title = interpolate(str(panel.get("title", "")), text)
    try:
        datasource = runner.datasource(target.get("datasource", panel.get("datasource")))
    except QueryError as exc:
        return PanelResult(
            dashboard.title,
            title,
            str(target.get("refId", "")),
            "?",
            "",
            error=str(exc),
            panel_id=panel.get("id"),
        )
    interval_ms = runner.interval_ms(
        datasource, max_data_points(panel), panel.get("interval") or None
    )
    query = runner.fill(target_query(target, datasource.type), datasource, interval_ms, text)
    result = PanelResult(
        dashboard.title,
        title,
        str(target.get("refId", "")),
        datasource.uid,
        query,
        panel_id=panel.get("id"),
    )
    try:
        if datasource.type == "influxdb":
            series = influx_query(runner.settings, runner.database, query)
            return dataclasses.replace(result, series=len(series), points=influx_points(series))
        if datasource.type == "prometheus":
            instant = bool(target.get("instant")) and not target.get("range")
            count, points = prometheus_query(
                runner.settings, query, runner.time_range, interval_ms, instant
            )
            return dataclasses.replace(result, series=count, points=points)
        return dataclasses.replace(
            result, error=f"no runner for datasource type {datasource.type!r}"
        )
    except QueryError as exc:
        return dataclasses.replace(result, error=str(exc))


def _run_annotation(
    runner: _Runner, dashboard: Dashboard, annotation: Mapping[str, Any], text: Mapping[str, str]
) -> PanelResult:
    """An annotation's query, run as a panel target over the whole time range (Grafana sends
    it once per dashboard, with the dashboard's variables). Reported with kind ``annotation``."""
    as_panel = {"title": f"annotation {annotation.get('name', '')}", "datasource": None}
    result = _run_target(runner, dashboard, as_panel, {**annotation, "refId": ""}, text)
    return dataclasses.replace(result, kind="annotation")


def _check_node_graph(
    runner: _Runner, dashboard: Dashboard, panel: Mapping[str, Any], text: Mapping[str, str]
) -> PanelResult:
    """A node graph panel's data contract: its instant results run through its transformations
    as Grafana would, then checked as the node graph reads them (stacktools.dashboards.nodegraph).
    Reported as one more result of the panel, ref_id ``node-graph``."""
    title = interpolate(str(panel.get("title", "")), text)
    result = PanelResult(
        dashboard.title, title, "node-graph", "prometheus", "", panel_id=panel.get("id")
    )
    results = {}
    try:
        for target in panel.get("targets") or []:
            datasource = runner.datasource(target.get("datasource", panel.get("datasource")))
            if datasource.type != "prometheus":
                raise QueryError(f"target {target.get('refId')}: node graphs here read Prometheus")
            interval_ms = runner.interval_ms(
                datasource, max_data_points(panel), panel.get("interval") or None
            )
            query = runner.fill(
                target_query(target, datasource.type), datasource, interval_ms, text
            )
            results[str(target.get("refId"))] = prometheus_instant_series(
                runner.settings, query, runner.time_range
            )
        problems = panel_problems(panel, results, runner.time_range.to_ms)
    except (QueryError, ModelError) as exc:
        return dataclasses.replace(result, error=str(exc))
    rows = sum(len(series) for series in results.values())
    return dataclasses.replace(
        result,
        query="node graph contract",
        series=rows,
        points=rows,
        error="; ".join(problems) or None,
    )


def check_dashboards(
    settings: DashboardSettings,
    from_ms: int,
    to_ms: int,
    variables: Mapping[str, str | Sequence[str]] | None = None,
    database: str | None = None,
    *,
    dashboards: Sequence[Dashboard] | None = None,
    datasources: Mapping[str, Datasource] | None = None,
) -> list[PanelResult]:
    """Run every variable query and every panel query of the dashboards against the stack.

    ``variables`` pins variables by name (a list for several values, ``$__all`` for All); the
    others are resolved like Grafana does on first load. ``database`` replaces the provisioned
    InfluxDB database (e.g. a test's private one). Errors are reported per result, not raised.
    """
    runner = _Runner(
        settings,
        database or settings.influx_database,
        datasources if datasources is not None else load_datasources(),
        TimeRange(from_ms, to_ms),
    )
    results: list[PanelResult] = []
    for dashboard in dashboards if dashboards is not None else load_dashboards():
        selections = _resolve_variables(runner, dashboard, variables or {}, results)
        definitions = dashboard.variables_by_name
        for panel, scope in expand_panels(dashboard, selections):
            text = {
                name: format_variable(selection, definitions[name])
                for name, selection in scope.items()
            }
            for target in panel.get("targets") or []:
                if isinstance(target, dict) and not target.get("hide"):
                    results.append(_run_target(runner, dashboard, panel, target, text))
            if panel.get("type") == "nodeGraph":
                results.append(_check_node_graph(runner, dashboard, panel, text))
        text = {
            name: format_variable(selection, definitions[name])
            for name, selection in selections.items()
        }
        for annotation in dashboard.annotation_queries:
            results.append(_run_annotation(runner, dashboard, annotation, text))
    return results
