"""Sending filled queries to the stack's InfluxDB and Prometheus, as Grafana's backend would.

Both are POSTed (the provisioned datasources use httpMode/httpMethod POST). Failures become
:class:`QueryError` so the check can report them per target and keep going.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from stacktools.dashboards import prometheus_api
from stacktools.dashboards.errors import PrometheusError, QueryError
from stacktools.dashboards.macros import prometheus_step_s
from stacktools.dashboards.model import TimeRange
from stacktools.dashboards.settings import DashboardSettings
from stacktools.stack.influx import InfluxClient


# ------------------------------------------------------------------------------------ InfluxDB
def influx_query(settings: DashboardSettings, database: str, query: str) -> list[dict[str, Any]]:
    """Run one InfluxQL statement with integer (ms) times; returns its series."""
    try:
        status, body = InfluxClient(settings).query(query, database=database, epoch="ms")
    except (OSError, ValueError) as exc:  # unreachable, timed out, or an answer that is not JSON
        raise QueryError(f"InfluxDB at {settings.influx_base_url}: {exc}") from None
    if body.get("error"):
        raise QueryError(str(body["error"]))
    if status != 200:
        raise QueryError(f"InfluxDB answered HTTP {status}: {str(body)[:300]}")
    series: list[dict[str, Any]] = []
    for result in body.get("results") or []:
        if result.get("error"):
            raise QueryError(str(result["error"]))
        series += result.get("series") or []
    return series


def influx_points(series: Sequence[Mapping[str, Any]]) -> int:
    """Rows that carry at least one value (fill(null) rows are not data)."""
    total = 0
    for one in series:
        columns = one.get("columns") or []
        value_columns = [i for i, name in enumerate(columns) if name != "time"]
        total += sum(
            1 for row in one.get("values") or [] if any(row[i] is not None for i in value_columns)
        )
    return total


def influx_values(series: Sequence[Mapping[str, Any]]) -> list[str]:
    """A variable query's options: the ``value`` column (SHOW TAG VALUES), else the first non-time
    one."""
    values: list[str] = []
    for one in series:
        columns = list(one.get("columns") or [])
        index = (
            columns.index("value")
            if "value" in columns
            else next((i for i, name in enumerate(columns) if name != "time"), 0)
        )
        for row in one.get("values") or []:
            text = str(row[index])
            if row[index] is not None and text not in values:
                values.append(text)
    return values


# ------------------------------------------------------------------------------------ Prometheus
def _prometheus(settings: DashboardSettings, path: str, params: Mapping[str, Any]) -> Any:
    """The HTTP API's ``data``; its failures become the checker's per-target QueryError."""
    try:
        return prometheus_api.call(settings, path, params)
    except PrometheusError as exc:
        raise QueryError(str(exc)) from None


def prometheus_query(
    settings: DashboardSettings,
    expr: str,
    time_range: TimeRange,
    interval_ms: int,
    instant: bool = False,
) -> tuple[int, int]:
    """Run a PromQL expression over the range (or at its end); returns (series, points)."""
    if instant:
        data = _prometheus(
            settings, "/api/v1/query", {"query": expr, "time": time_range.to_ms / 1000}
        )
    else:
        step = prometheus_step_s(time_range, interval_ms)
        start = math.floor(time_range.from_ms / 1000 / step) * step  # aligned like Grafana does
        data = _prometheus(
            settings,
            "/api/v1/query_range",
            {"query": expr, "start": start, "end": time_range.to_ms / 1000, "step": step},
        )
    if data.get("resultType") in {"scalar", "string"}:
        return 1, 1
    series = data.get("result") or []
    return len(series), sum(len(s.get("values") or []) if "values" in s else 1 for s in series)


def prometheus_instant_series(
    settings: DashboardSettings, expr: str, time_range: TimeRange
) -> list[tuple[dict[str, str], float]]:
    """An instant query at the range's end, as Grafana sends it: (labels, value) per series."""
    data = _prometheus(settings, "/api/v1/query", {"query": expr, "time": time_range.to_ms / 1000})
    if data.get("resultType") == "scalar":
        return [({}, float(data["result"][1]))]
    return [
        (dict(series.get("metric") or {}), float(series["value"][1]))
        for series in data.get("result") or []
    ]


def prometheus_variable_values(
    settings: DashboardSettings, query: str, time_range: TimeRange
) -> list[str]:
    """``label_values(label)`` / ``label_values(metric, label)``, the variable query Grafana
    offers."""
    match = re.fullmatch(r"\s*label_values\(\s*(?:(.+?)\s*,\s*)?(\w+)\s*\)\s*", query)
    if not match:
        raise QueryError(f"unsupported Prometheus variable query {query!r} (use label_values)")
    params: dict[str, Any] = {"start": time_range.from_ms / 1000, "end": time_range.to_ms / 1000}
    if match.group(1):
        params["match[]"] = [match.group(1)]
    data = _prometheus(settings, f"/api/v1/label/{match.group(2)}/values", params)
    return [str(v) for v in data or []]
