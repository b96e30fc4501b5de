"""What Grafana's frontend does to a query before it leaves the browser.

``$__interval`` comes from the time range and the panel's width, ``$__rate_interval`` from that
and the scrape interval, ``$timeFilter`` and friends from the range; template variables are
formatted the way the InfluxDB and Prometheus datasources format them. Getting these exactly
right is the point: a query that only works with hand-picked values proves nothing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from stacktools.dashboards.intervals import format_interval, round_interval_ms
from stacktools.dashboards.model import GRID_COLUMNS, Selection, TimeRange

#: Grafana uses the panel's width in pixels as max data points; on a 1920 px wide screen a
#: 24-column panel is about that wide. Without a browser we derive the width from gridPos.w.
SCREEN_WIDTH_PX = 1920
#: Prometheus refuses more than 11,000 points per series; Grafana widens the step to stay below.
PROMETHEUS_MAX_POINTS = 11_000

_VARIABLE_REF = re.compile(r"\$\{(\w+)(?::[^}]*)?\}|\[\[(\w+)(?::[^\]]*)?\]\]|\$(\w+)")


# ------------------------------------------------------------------------------------ intervals
def calculate_interval_ms(range_ms: int, max_data_points: int, min_interval_ms: int) -> int:
    """``$__interval`` like Grafana: range / max data points, rounded, never below the minimum
    (the panel's min interval, else the datasource's timeInterval)."""
    return max(round_interval_ms(range_ms / max(max_data_points, 1)), min_interval_ms)


def rate_interval_ms(interval_ms: int, scrape_interval_ms: int) -> int:
    """``$__rate_interval``: at least four scrapes, so rate() always has two samples to work
    with."""
    return max(interval_ms + scrape_interval_ms, 4 * scrape_interval_ms)


def max_data_points(panel: Mapping[str, Any]) -> int:
    """The panel's maxDataPoints, else its approximate width in pixels (Grafana's default)."""
    if isinstance(panel.get("maxDataPoints"), int) and panel["maxDataPoints"] > 0:
        return int(panel["maxDataPoints"])
    width = (panel.get("gridPos") or {}).get("w", GRID_COLUMNS)
    return max(round(width / GRID_COLUMNS * SCREEN_WIDTH_PX), 1)


def prometheus_step_s(time_range: TimeRange, interval_ms: int) -> float:
    """The query_range step: ``$__interval``, widened so a series stays under 11,000 points."""
    return max(interval_ms / 1000, math.ceil(time_range.range_ms / 1000 / PROMETHEUS_MAX_POINTS))


# ------------------------------------------------------------------------------------ macros
def _seconds_text(ms: int) -> str:
    """Prometheus durations as Grafana's Prometheus datasource writes them: whole seconds
    ('65s')."""
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def builtin_values(
    time_range: TimeRange,
    interval_ms: int,
    scrape_interval_ms: int,
    datasource_type: str = "influxdb",
) -> dict[str, str]:
    """The text each Grafana macro is replaced with for one query.

    InfluxQL gets ``$__interval`` in Grafana's largest-unit form ('1m'); Prometheus gets the
    query step and ``$__rate_interval`` in seconds ('65s'), as its datasource does, so
    ``interval + scrape`` is never truncated to a smaller window.
    """
    range_s = time_range.range_ms // 1000
    values = {
        "timeFilter": f"time >= {time_range.from_ms}ms and time <= {time_range.to_ms}ms",
        "__from": str(time_range.from_ms),
        "__to": str(time_range.to_ms),
        "__range": f"{range_s}s",
        "__range_s": str(range_s),
        "__range_ms": str(time_range.range_ms),
    }
    values["__timeFilter"] = values["timeFilter"]
    if datasource_type == "prometheus":
        step_ms = int(prometheus_step_s(time_range, interval_ms) * 1000)
        rate = rate_interval_ms(step_ms, scrape_interval_ms)
        text = _seconds_text(step_ms)
        return values | {
            "__interval": text,
            "interval": text,
            "__interval_ms": str(step_ms),
            "__rate_interval": _seconds_text(rate),
            "__rate_interval_ms": str(rate),
        }
    rate = rate_interval_ms(interval_ms, scrape_interval_ms)
    text = format_interval(interval_ms)
    return values | {
        "__interval": text,
        "interval": text,
        "__interval_ms": str(interval_ms),
        "__rate_interval": format_interval(rate),
        "__rate_interval_ms": str(rate),
    }


# ------------------------------------------------------------------------------------ variables
def regex_escape(value: str) -> str:
    """Escape a value for an InfluxQL ``/.../`` or PromQL ``=~`` regex (the slash included)."""
    return re.sub(r"([\\^$*+?.()|\[\]{}/])", r"\\\1", value)


def format_variable(selection: Selection, variable: Mapping[str, Any]) -> str:
    """A variable's text in a query, the way Grafana's InfluxDB and Prometheus datasources do it.

    A variable that can hold several values is used inside a regex (``=~ /^$var$/``), so its
    values are regex-escaped and joined as ``(a|b)``; "All" is the variable's ``allValue`` when
    set, else every option. A single-value variable is inserted as it is.
    """
    if selection.is_all and variable.get("allValue"):
        return str(variable["allValue"])
    values = selection.effective()
    if not (variable.get("multi") or variable.get("includeAll")):
        return values[0] if values else ""
    escaped = [regex_escape(v) for v in values]
    if len(escaped) <= 1:
        return escaped[0] if escaped else ""
    return "(" + "|".join(escaped) + ")"


def variable_references(text: str) -> list[str]:
    """Names used as ``$name``, ``${name}``, ``${name:format}`` or ``[[name]]``."""
    return [
        next(group for group in match.groups() if group)
        for match in _VARIABLE_REF.finditer(text or "")
    ]


def interpolate(text: str, values: Mapping[str, str]) -> str:
    """Replace every ``$name``/``${name}``/``[[name]]`` found in ``values``; leave others as they
    are."""

    def replace(match: re.Match[str]) -> str:
        name = next(group for group in match.groups() if group)
        return values.get(name, match.group(0))

    return _VARIABLE_REF.sub(replace, text)


def fill_query(
    query: str,
    time_range: TimeRange,
    interval_ms: int,
    scrape_interval_ms: int,
    variables: Mapping[str, str],
    datasource_type: str = "influxdb",
) -> str:
    """A query as Grafana would send it: macros and template variables filled in."""
    macros = builtin_values(time_range, interval_ms, scrape_interval_ms, datasource_type)
    return interpolate(query, {**variables, **macros})
