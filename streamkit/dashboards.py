"""Grafana dashboards: a structural check and a dry run of every query against the real stack.

There is no Grafana here to load the provisioned JSON (grafana/dashboards/), so a broken
dashboard would only show up as an empty or red panel after deployment. This module closes that
gap in two steps:

1. ``validate_dashboards`` checks what Grafana 11.6 needs to provision and render a dashboard
   (schema version, unique uids and panel ids, grid positions, datasource uids that exist in
   grafana/provisioning/datasources/datasources.yaml, well-formed targets and variables, repeats
   and ``$variables`` that refer to something) and returns readable problems instead of raising,
   so one run reports all of them.
2. ``check_dashboards`` does what Grafana's frontend does before a query leaves the browser
   (resolve the template variables by running their own queries, compute ``$__interval`` from the
   time range and the panel's data points, fill ``$timeFilter`` and the other macros, expand
   repeated panels) and then sends every query to the local InfluxDB and Prometheus, reporting
   series and points per panel target.

Only the stdlib (urllib) and PyYAML are used, so the check runs wherever the stack runs.

CLI::

    python -m streamkit.dashboards validate
    python -m streamkit.dashboards list
    python -m streamkit.dashboards check [--from-ms X --to-ms Y] [--var thing=Thing1 ...] [--require-data]
"""
from __future__ import annotations

import argparse
import base64
import dataclasses
import json
import math
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from streamkit.config import Settings
from streamkit.paths import REPO_ROOT

DASHBOARD_DIR = REPO_ROOT / "grafana" / "dashboards"
DATASOURCES_FILE = REPO_ROOT / "grafana" / "provisioning" / "datasources" / "datasources.yaml"

#: Grafana 11.6's dashboard schema version (11.5 wrote 40; 11.6 migrates everything to 41). A
#: file with an older number is migrated on every load, a newer one may not load at all.
SCHEMA_VERSION = 41
REQUIRED_KEYS: tuple[str, ...] = ("uid", "title", "schemaVersion", "time", "panels", "templating", "annotations")
#: Panel types shipped with Grafana 11.6 that these dashboards may use (no external plugins).
PANEL_TYPES = frozenset({"timeseries", "stat", "gauge", "bargauge", "table", "text", "row", "state-timeline",
                         "status-history", "barchart", "histogram", "heatmap", "piechart", "logs"})
VARIABLE_TYPES = frozenset({"query", "custom", "constant", "interval", "textbox", "datasource", "adhoc"})
#: Macros and global variables Grafana fills itself; a query may use them without defining them.
BUILTIN_VARIABLES = frozenset({"timeFilter", "__timeFilter", "interval", "__interval", "__interval_ms",
                               "__rate_interval", "__rate_interval_ms", "__range", "__range_s", "__range_ms",
                               "__from", "__to", "__dashboard", "__org", "__user"})
ALL_VALUE = "$__all"
#: Grafana uses the panel's width in pixels as max data points; on a 1920 px wide screen a
#: 24-column panel is about that wide. Without a browser we derive the width from gridPos.w.
SCREEN_WIDTH_PX = 1920
GRID_COLUMNS = 24
#: Prometheus refuses more than 11,000 points per series; Grafana widens the step to stay below.
PROMETHEUS_MAX_POINTS = 11_000
HTTP_TIMEOUT_S = 30.0

_VARIABLE_REF = re.compile(r"\$\{(\w+)(?::[^}]*)?\}|\[\[(\w+)(?::[^\]]*)?\]\]|\$(\w+)")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w|y)\s*$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000, "y": 31_536_000_000}
#: Grafana's interval rounding (rangeutil.roundInterval) as (upper bound, rounded) pairs in ms:
#: a raw interval below the bound becomes the rounded value, so intervals are "nice" numbers.
_ROUNDING_MS: tuple[tuple[int, int], ...] = (
    (15, 10), (35, 20), (75, 50), (150, 100), (350, 200), (750, 500), (1_500, 1_000), (3_500, 2_000),
    (7_500, 5_000), (12_500, 10_000), (17_500, 15_000), (25_000, 20_000), (45_000, 30_000), (90_000, 60_000),
    (210_000, 120_000), (450_000, 300_000), (750_000, 600_000), (1_050_000, 900_000), (1_500_000, 1_200_000),
    (2_700_000, 1_800_000), (5_400_000, 3_600_000), (9_000_000, 7_200_000), (16_200_000, 10_800_000),
    (32_400_000, 21_600_000), (86_400_000, 43_200_000), (604_800_000, 86_400_000),
    (1_814_400_000, 604_800_000), (3_628_800_000, 2_592_000_000))
_YEAR_MS = 31_536_000_000


class QueryError(Exception):
    """A datasource refused a query or could not be reached; the message is shown per target."""


# ------------------------------------------------------------------------------------ model
@dataclasses.dataclass(frozen=True)
class Datasource:
    """One provisioned datasource: what a dashboard may refer to by uid."""

    uid: str
    type: str
    name: str
    #: ``jsonData.timeInterval``: the lowest ``$__interval`` (InfluxDB) or the scrape interval
    #: Grafana assumes for ``$__rate_interval`` (Prometheus).
    time_interval_ms: int


@dataclasses.dataclass(frozen=True)
class Dashboard:
    """A dashboard file as Grafana's file provisioner reads it."""

    path: Path
    model: dict[str, Any]

    @property
    def title(self) -> str:
        return str(self.model.get("title", self.path.stem))

    @property
    def variables(self) -> list[dict[str, Any]]:
        templating = self.model.get("templating") or {}
        return list(templating.get("list") or []) if isinstance(templating, dict) else []


@dataclasses.dataclass(frozen=True)
class TimeRange:
    """An absolute dashboard time range in epoch milliseconds (Grafana's ``$__from``/``$__to``)."""

    from_ms: int
    to_ms: int

    @property
    def range_ms(self) -> int:
        return max(self.to_ms - self.from_ms, 1)


@dataclasses.dataclass(frozen=True)
class Selection:
    """The current value(s) of a template variable, and every option it had to choose from."""

    values: tuple[str, ...]
    is_all: bool = False
    options: tuple[str, ...] = ()

    def effective(self) -> tuple[str, ...]:
        """What an "All" selection stands for: every option."""
        return self.options if self.is_all else self.values


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
    kind: str = "panel"  # "panel" or "variable"
    panel_id: int | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


# ------------------------------------------------------------------------------------ loading
def parse_duration_ms(text: str) -> int:
    """'5s' -> 5000: Grafana's interval strings (ms, s, m, h, d, w, y)."""
    match = _DURATION.match(text or "")
    if not match:
        raise ValueError(f"not a duration: {text!r}")
    return int(float(match.group(1)) * _UNIT_MS[match.group(2)])


def load_datasources(path: Path = DATASOURCES_FILE) -> dict[str, Datasource]:
    """The datasources Grafana provisions, by uid: the only ones a dashboard can use."""
    config = yaml.safe_load(path.read_text()) or {}
    found: dict[str, Datasource] = {}
    for entry in config.get("datasources") or []:
        interval = (entry.get("jsonData") or {}).get("timeInterval") or "1s"
        found[entry["uid"]] = Datasource(uid=entry["uid"], type=entry["type"], name=entry.get("name", entry["uid"]),
                                         time_interval_ms=parse_duration_ms(interval))
    return found


def load_dashboards(directory: Path = DASHBOARD_DIR) -> list[Dashboard]:
    """Every ``*.json`` in the provisioned folder; a file that is not a JSON object is an error."""
    dashboards = []
    for path in sorted(directory.glob("*.json")):
        try:
            model = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path.name}: not valid JSON: {exc}") from None
        if not isinstance(model, dict):
            raise ValueError(f"{path.name}: a dashboard must be a JSON object")  # noqa: TRY004 (a file, not a type)
        dashboards.append(Dashboard(path, model))
    return dashboards


def iter_panels(model: Mapping[str, Any]) -> Iterator[tuple[dict[str, Any], dict[str, Any] | None]]:
    """Every panel with the row it belongs to (rows included, with row None).

    An expanded row's panels follow it in the top-level list, a collapsed row holds them in its
    own ``panels``; both belong to the row, which matters for repeated rows.
    """
    row: dict[str, Any] | None = None
    for panel in model.get("panels") or []:
        if not isinstance(panel, dict):
            continue
        if panel.get("type") == "row":
            row = panel
            yield panel, None
            for nested in panel.get("panels") or []:
                if isinstance(nested, dict):
                    yield nested, panel
        else:
            yield panel, row


def variable_references(text: str) -> list[str]:
    """Names used as ``$name``, ``${name}``, ``${name:format}`` or ``[[name]]``."""
    return [next(group for group in match.groups() if group) for match in _VARIABLE_REF.finditer(text or "")]


def target_query(target: Mapping[str, Any], datasource_type: str) -> str:
    """The query text of a target: ``query`` for InfluxQL, ``expr`` for PromQL."""
    return str(target.get("expr" if datasource_type == "prometheus" else "query") or "")


def variable_query(variable: Mapping[str, Any]) -> str:
    """A variable's query: Grafana stores it as a string or as ``{"query": ...}``."""
    query = variable.get("query")
    if isinstance(query, dict):
        query = query.get("query")
    return str(query or "")


# ------------------------------------------------------------------------------------ validation
def _datasource_problems(where: str, ref: Any, datasources: Mapping[str, Datasource]) -> list[str]:
    if not isinstance(ref, dict) or not ref.get("uid"):
        return [f"{where}: datasource must be an object with a uid (one of {sorted(datasources)})"]
    known = datasources.get(ref["uid"])
    if known is None:
        return [f"{where}: unknown datasource uid {ref['uid']!r} (provisioned: {sorted(datasources)})"]
    if ref.get("type") not in (None, known.type):
        return [f"{where}: datasource {ref['uid']!r} is of type {known.type!r}, not {ref.get('type')!r}"]
    return []


def _reference_problems(where: str, text: str, known: set[str]) -> list[str]:
    unknown = sorted({name for name in variable_references(text) if name not in known})
    return [f"{where}: undefined variable ${name}" for name in unknown]


def _check_top_level(model: Mapping[str, Any]) -> list[str]:
    problems = [f"missing top-level key {key!r}" for key in REQUIRED_KEYS if key not in model]
    uid = model.get("uid")
    if "uid" in model and not (isinstance(uid, str) and re.fullmatch(r"[A-Za-z0-9_-]{1,40}", uid)):
        problems.append(f"uid {uid!r} must be 1-40 letters, digits, '-' or '_'")
    if "schemaVersion" in model and model.get("schemaVersion") != SCHEMA_VERSION:
        problems.append(f"schemaVersion is {model.get('schemaVersion')!r}, Grafana 11.6 uses {SCHEMA_VERSION}")
    if model.get("id") is not None:
        problems.append("id must be null in a provisioned dashboard (Grafana assigns it)")
    time_range = model.get("time")
    if "time" in model and not (isinstance(time_range, dict) and time_range.get("from") and time_range.get("to")):
        problems.append("time must have 'from' and 'to'")
    if "panels" in model and not isinstance(model.get("panels"), list):
        problems.append("panels must be a list")
    return problems


def _check_grid(where: str, panel: Mapping[str, Any]) -> list[str]:
    grid = panel.get("gridPos")
    if not isinstance(grid, dict):
        return [f"{where}: missing gridPos"]
    if not all(isinstance(grid.get(key), int) for key in ("h", "w", "x", "y")):
        return [f"{where}: gridPos needs integer h, w, x and y"]
    if grid["w"] < 1 or grid["h"] < 1 or grid["x"] < 0 or grid["y"] < 0 or grid["x"] + grid["w"] > GRID_COLUMNS:
        return [f"{where}: gridPos {grid} is outside the {GRID_COLUMNS}-column grid"]
    return []


def _check_overlaps(panels: Sequence[Mapping[str, Any]]) -> list[str]:
    """Overlapping panels are silently moved by Grafana; the file should say where they are."""
    boxes = [(p, p["gridPos"]) for p in panels if isinstance(p.get("gridPos"), dict)
             and all(isinstance(p["gridPos"].get(k), int) for k in ("h", "w", "x", "y"))]
    problems = []
    for i, (first, a) in enumerate(boxes):
        for second, b in boxes[i + 1:]:
            if a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"] and a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"]:
                problems.append(f"panels {first.get('id')} and {second.get('id')} overlap ({a} / {b})")
    return problems


def _check_target(where: str, target: Any, panel_ds: Any, datasources: Mapping[str, Datasource],
                  known: set[str]) -> list[str]:
    if not isinstance(target, dict):
        return [f"{where}: a target must be an object"]
    if not target.get("refId"):
        return [f"{where}: target without refId"]
    where = f"{where} target {target['refId']}"
    ref = target.get("datasource", panel_ds)
    problems = _datasource_problems(where, ref, datasources)
    if problems:
        return problems
    kind = datasources[ref["uid"]].type
    query = target_query(target, kind)
    if not query.strip():
        problems.append(f"{where}: no query ({'expr' if kind == 'prometheus' else 'query'} is empty)")
    if kind == "influxdb" and target.get("rawQuery") is not True:
        problems.append(f"{where}: InfluxQL targets must be raw queries (rawQuery: true)")
    return problems + _reference_problems(where, query, known)


def _check_panel(panel: Mapping[str, Any], datasources: Mapping[str, Datasource], variables: Mapping[str, Any],
                 known: set[str]) -> list[str]:
    where = f"panel {panel.get('id')} {panel.get('title', '')!r}"
    problems = _check_grid(where, panel)
    if panel.get("type") not in PANEL_TYPES:
        problems.append(f"{where}: unknown panel type {panel.get('type')!r}")
    if not isinstance(panel.get("id"), int):
        problems.append(f"{where}: id must be an integer")
    problems += _reference_problems(where + " title", str(panel.get("title", "")), known)
    repeat = panel.get("repeat")
    if repeat:
        variable = variables.get(repeat)
        if variable is None:
            problems.append(f"{where}: repeat refers to undefined variable {repeat!r}")
        elif not (variable.get("multi") or variable.get("includeAll")):
            problems.append(f"{where}: repeat variable {repeat!r} allows one value only (set multi or includeAll)")
        if panel.get("repeatDirection", "h") not in {"h", "v"}:
            problems.append(f"{where}: repeatDirection must be 'h' or 'v'")
    if panel.get("type") == "row":
        return problems
    problems += _datasource_problems(where, panel.get("datasource"), datasources)
    targets = panel.get("targets")
    if not isinstance(targets, list) or not targets:
        return problems + [f"{where}: no targets"]
    ref_ids = [t.get("refId") for t in targets if isinstance(t, dict)]
    problems += [f"{where}: duplicate refId {r!r}" for r in sorted({r for r in ref_ids if r and ref_ids.count(r) > 1})]
    for target in targets:
        problems += _check_target(where, target, panel.get("datasource"), datasources, known)
    return problems


def _check_variables(variables: Sequence[Any], datasources: Mapping[str, Datasource]) -> list[str]:
    problems: list[str] = []
    seen: set[str] = set()
    for variable in variables:
        if not isinstance(variable, dict) or not variable.get("name"):
            problems.append("template variable without a name")
            continue
        name = variable["name"]
        where = f"variable {name!r}"
        if not re.fullmatch(r"\w+", name) or name in BUILTIN_VARIABLES:
            problems.append(f"{where}: name must be a word and not a Grafana built-in")
        if name in seen:
            problems.append(f"{where}: defined twice")
        seen.add(name)
        kind = variable.get("type")
        if kind not in VARIABLE_TYPES:
            problems.append(f"{where}: unknown type {kind!r}")
            continue
        if kind in {"query", "custom", "constant", "interval"} and not variable_query(variable).strip():
            problems.append(f"{where}: empty query")
        if kind == "query":
            problems += _datasource_problems(where, variable.get("datasource"), datasources)
            if variable.get("refresh") not in (1, 2):
                problems.append(f"{where}: refresh must be 1 (on load) or 2 (on time range change)")
            # Variables may only use variables defined before them, like Grafana's dependency order.
            problems += _reference_problems(where, variable_query(variable), seen - {name} | BUILTIN_VARIABLES)
        if variable.get("regex"):
            try:
                js_regex(str(variable["regex"]))
            except (re.error, ValueError) as exc:
                problems.append(f"{where}: bad regex {variable['regex']!r}: {exc}")
    return problems


def validate_dashboard(model: Mapping[str, Any], datasources: Mapping[str, Datasource]) -> list[str]:
    """Every structural problem of one dashboard, as readable sentences (empty: fine)."""
    problems = _check_top_level(model)
    variables = [v for v in (model.get("templating") or {}).get("list") or [] if isinstance(v, dict)]
    problems += _check_variables(variables, datasources)
    by_name = {v.get("name"): v for v in variables if v.get("name")}
    known = set(by_name) | BUILTIN_VARIABLES
    panels = [panel for panel, _ in iter_panels(model)]
    ids = [p.get("id") for p in panels]
    problems += [f"duplicate panel id {i}" for i in sorted({i for i in ids if isinstance(i, int) and ids.count(i) > 1})]
    for panel in panels:
        problems += _check_panel(panel, datasources, by_name, known)
    top_level = [p for p in model.get("panels") or [] if isinstance(p, dict)]
    return problems + _check_overlaps(top_level)


def validate_dashboards(dashboards: Sequence[Dashboard], datasources: Mapping[str, Datasource]) -> list[str]:
    """Problems of every dashboard, prefixed with its file, plus uids or titles used twice."""
    problems: list[str] = []
    for key in ("uid", "title"):
        owners: dict[Any, list[str]] = {}
        for dashboard in dashboards:
            owners.setdefault(dashboard.model.get(key), []).append(dashboard.path.name)
        problems += [f"{key} {value!r} is used by {', '.join(files)}" for value, files in owners.items()
                     if value is not None and len(files) > 1]
    for dashboard in dashboards:
        problems += [f"{dashboard.path.name}: {problem}" for problem in validate_dashboard(dashboard.model, datasources)]
    return problems


# ------------------------------------------------------------------------------------ macros
def round_interval_ms(interval_ms: float) -> int:
    """Grafana's rounding of a raw interval to a 'nice' one (10ms, 20ms, ... 1m, 2m, 5m, ... 1y)."""
    for bound, rounded in _ROUNDING_MS:
        if interval_ms < bound:
            return rounded
    return _YEAR_MS


def calculate_interval_ms(range_ms: int, max_data_points: int, min_interval_ms: int) -> int:
    """``$__interval`` like Grafana: range / max data points, rounded, never below the minimum
    (the panel's min interval, else the datasource's timeInterval)."""
    return max(round_interval_ms(range_ms / max(max_data_points, 1)), min_interval_ms)


def rate_interval_ms(interval_ms: int, scrape_interval_ms: int) -> int:
    """``$__rate_interval``: at least four scrapes, so rate() always has two samples to work with."""
    return max(interval_ms + scrape_interval_ms, 4 * scrape_interval_ms)


def format_duration(ms: int) -> str:
    """Grafana's secondsToHms: the largest whole unit, truncated ('90s' -> '1m', '1500ms' -> '1s')."""
    for unit in ("y", "d", "h", "m", "s", "ms"):
        size = _UNIT_MS[unit]
        if ms >= size:
            return f"{ms // size}{unit}"
    return "1ms"  # Grafana says "less than a millisecond"; no query language accepts that


def max_data_points(panel: Mapping[str, Any]) -> int:
    """The panel's maxDataPoints, else its approximate width in pixels (Grafana's default)."""
    if isinstance(panel.get("maxDataPoints"), int) and panel["maxDataPoints"] > 0:
        return int(panel["maxDataPoints"])
    width = (panel.get("gridPos") or {}).get("w", GRID_COLUMNS)
    return max(round(width / GRID_COLUMNS * SCREEN_WIDTH_PX), 1)


def _seconds_text(ms: int) -> str:
    """Prometheus durations as Grafana's Prometheus datasource writes them: whole seconds ('65s')."""
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def builtin_values(time_range: TimeRange, interval_ms: int, scrape_interval_ms: int,
                   datasource_type: str = "influxdb") -> dict[str, str]:
    """The text each Grafana macro is replaced with for one query.

    InfluxQL gets ``$__interval`` in Grafana's largest-unit form ('1m'); Prometheus gets the
    query step and ``$__rate_interval`` in seconds ('65s'), as its datasource does, so
    ``interval + scrape`` is never truncated to a smaller window.
    """
    range_s = time_range.range_ms // 1000
    values = {
        "timeFilter": f"time >= {time_range.from_ms}ms and time <= {time_range.to_ms}ms",
        "__from": str(time_range.from_ms), "__to": str(time_range.to_ms),
        "__range": f"{range_s}s", "__range_s": str(range_s), "__range_ms": str(time_range.range_ms),
    }
    values["__timeFilter"] = values["timeFilter"]
    if datasource_type == "prometheus":
        step_ms = int(prometheus_step_s(time_range, interval_ms) * 1000)
        rate = rate_interval_ms(step_ms, scrape_interval_ms)
        text = _seconds_text(step_ms)
        return values | {"__interval": text, "interval": text, "__interval_ms": str(step_ms),
                         "__rate_interval": _seconds_text(rate), "__rate_interval_ms": str(rate)}
    rate = rate_interval_ms(interval_ms, scrape_interval_ms)
    text = format_duration(interval_ms)
    return values | {"__interval": text, "interval": text, "__interval_ms": str(interval_ms),
                     "__rate_interval": format_duration(rate), "__rate_interval_ms": str(rate)}


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


def interpolate(text: str, values: Mapping[str, str]) -> str:
    """Replace every ``$name``/``${name}``/``[[name]]`` found in ``values``; leave others as they are."""
    def replace(match: re.Match[str]) -> str:
        name = next(group for group in match.groups() if group)
        return values.get(name, match.group(0))
    return _VARIABLE_REF.sub(replace, text)


def fill_query(query: str, time_range: TimeRange, interval_ms: int, scrape_interval_ms: int,
               variables: Mapping[str, str], datasource_type: str = "influxdb") -> str:
    """A query as Grafana would send it: macros and template variables filled in."""
    macros = builtin_values(time_range, interval_ms, scrape_interval_ms, datasource_type)
    return interpolate(query, {**variables, **macros})


def js_regex(text: str) -> re.Pattern[str]:
    """A Grafana variable regex ('/pattern/flags') as a Python pattern."""
    match = re.fullmatch(r"/(.*)/([gimsuy]*)", text.strip(), re.DOTALL)
    if not match:
        raise ValueError("expected /pattern/flags")
    flags = (re.IGNORECASE if "i" in match.group(2) else 0) | (re.MULTILINE if "m" in match.group(2) else 0)
    return re.compile(match.group(1).replace("(?<", "(?P<").replace("(?P<=", "(?<=").replace("(?P<!", "(?<!"), flags)


def apply_variable_regex(values: Sequence[str], regex: str) -> list[str]:
    """Grafana's variable regex: keep matching values; a capture group (or ``value``) replaces the value."""
    if not regex:
        return list(values)
    pattern = js_regex(regex)
    kept: list[str] = []
    for value in values:
        match = pattern.search(value)
        if not match:
            continue
        groups = match.groupdict()
        chosen = groups.get("value") or groups.get("text") or (match.group(1) if match.groups() else value)
        if chosen is not None and chosen not in kept:
            kept.append(chosen)
    return kept


def sort_options(values: Sequence[str], sort: int) -> list[str]:
    """Grafana's variable sort: 0 none, 1/2 alphabetical, 3/4 numerical, 5/6 case-insensitive."""
    def number(value: str) -> float:
        match = re.search(r"-?\d+(?:\.\d+)?", value)
        return float(match.group(0)) if match else math.inf
    keys = {1: str, 2: str, 3: number, 4: number, 5: str.lower, 6: str.lower}
    if sort not in keys:
        return list(values)
    return sorted(values, key=keys[sort], reverse=sort in {2, 4, 6})


# ------------------------------------------------------------------------------------ datasources
def _http_json(request: urllib.request.Request) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as response:
            return json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        body = exc.read()
        try:
            return json.loads(body or b"{}") | {"_status": exc.code}
        except json.JSONDecodeError:
            raise QueryError(f"HTTP {exc.code}: {body[:300]!r}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise QueryError(f"cannot reach {request.full_url}: {exc}") from None


def influx_query(settings: Settings, database: str, query: str) -> list[dict[str, Any]]:
    """POST one InfluxQL statement (as Grafana does with httpMode POST); returns its series."""
    form = urllib.parse.urlencode({"db": database, "q": query, "epoch": "ms"}).encode()
    request = urllib.request.Request(f"{settings.influx_base_url}/query", data=form)
    token = base64.b64encode(f"{settings.influx_username}:{settings.influx_password}".encode()).decode()
    request.add_header("Authorization", f"Basic {token}")
    body = _http_json(request)
    if body.get("error"):
        raise QueryError(str(body["error"]))
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
        total += sum(1 for row in one.get("values") or [] if any(row[i] is not None for i in value_columns))
    return total


def influx_values(series: Sequence[Mapping[str, Any]]) -> list[str]:
    """A variable query's options: the ``value`` column (SHOW TAG VALUES), else the first non-time one."""
    values: list[str] = []
    for one in series:
        columns = list(one.get("columns") or [])
        index = columns.index("value") if "value" in columns else next(
            (i for i, name in enumerate(columns) if name != "time"), 0)
        for row in one.get("values") or []:
            text = str(row[index])
            if row[index] is not None and text not in values:
                values.append(text)
    return values


def _prometheus(settings: Settings, path: str, params: Mapping[str, Any]) -> Any:
    request = urllib.request.Request(f"http://127.0.0.1:{settings.prometheus_port}{path}",
                                     data=urllib.parse.urlencode(params, doseq=True).encode())
    body = _http_json(request)
    if body.get("status") != "success":
        raise QueryError(f"{body.get('errorType', 'error')}: {body.get('error', body)}")
    return body.get("data")


def prometheus_step_s(time_range: TimeRange, interval_ms: int) -> float:
    """The query_range step: ``$__interval``, widened so a series stays under 11,000 points."""
    return max(interval_ms / 1000, math.ceil(time_range.range_ms / 1000 / PROMETHEUS_MAX_POINTS))


def prometheus_query(settings: Settings, expr: str, time_range: TimeRange, interval_ms: int,
                     instant: bool = False) -> tuple[int, int]:
    """Run a PromQL expression over the range (or at its end); returns (series, points)."""
    if instant:
        data = _prometheus(settings, "/api/v1/query", {"query": expr, "time": time_range.to_ms / 1000})
    else:
        step = prometheus_step_s(time_range, interval_ms)
        start = math.floor(time_range.from_ms / 1000 / step) * step  # aligned like Grafana does
        data = _prometheus(settings, "/api/v1/query_range",
                           {"query": expr, "start": start, "end": time_range.to_ms / 1000, "step": step})
    result = data.get("result")
    if data.get("resultType") in {"scalar", "string"}:
        return 1, 1
    series = result or []
    return len(series), sum(len(s.get("values") or []) if "values" in s else 1 for s in series)


def prometheus_variable_values(settings: Settings, query: str, time_range: TimeRange) -> list[str]:
    """``label_values(label)`` / ``label_values(metric, label)``, the variable query Grafana offers."""
    match = re.fullmatch(r"\s*label_values\(\s*(?:(.+?)\s*,\s*)?(\w+)\s*\)\s*", query)
    if not match:
        raise QueryError(f"unsupported Prometheus variable query {query!r} (use label_values)")
    params: dict[str, Any] = {"start": time_range.from_ms / 1000, "end": time_range.to_ms / 1000}
    if match.group(1):
        params["match[]"] = [match.group(1)]
    data = _prometheus(settings, f"/api/v1/label/{match.group(2)}/values", params)
    return [str(v) for v in data or []]


# ------------------------------------------------------------------------------------ running
@dataclasses.dataclass
class _Runner:
    """What every query of one check shares: where to send it and for which time range."""

    settings: Settings
    database: str
    datasources: Mapping[str, Datasource]
    time_range: TimeRange

    def datasource(self, ref: Any) -> Datasource:
        uid = ref.get("uid") if isinstance(ref, dict) else None
        if uid not in self.datasources:
            raise QueryError(f"unknown datasource {ref!r}")
        return self.datasources[uid]

    def interval_ms(self, datasource: Datasource, points: int, panel_interval: str | None = None) -> int:
        low = parse_duration_ms(panel_interval) if panel_interval else datasource.time_interval_ms
        return calculate_interval_ms(self.time_range.range_ms, points, low)

    def fill(self, query: str, datasource: Datasource, interval_ms: int, variables: Mapping[str, str]) -> str:
        return fill_query(query, self.time_range, interval_ms, datasource.time_interval_ms, variables, datasource.type)


def _variable_options(runner: _Runner, variable: Mapping[str, Any], text: Mapping[str, str],
                      dashboard: str, results: list[PanelResult]) -> list[str]:
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
        results.append(PanelResult(dashboard, f"variable {variable['name']}", "", "?", raw, error=str(exc),
                                   kind="variable"))
        return []
    query = runner.fill(raw, datasource, runner.interval_ms(datasource, SCREEN_WIDTH_PX), text)
    result = PanelResult(dashboard, f"variable {variable['name']}", "", datasource.uid, query, kind="variable")
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
    return sort_options(apply_variable_regex(found, str(variable.get("regex") or "")), int(variable.get("sort") or 0))


def default_selection(variable: Mapping[str, Any], options: Sequence[str]) -> Selection:
    """Grafana's choice when the URL says nothing: the saved current value if it is still an
    option (or All), else the first entry of the list, which is "All" when the variable has it."""
    current = (variable.get("current") or {}).get("value")
    wanted = [current] if isinstance(current, str) else list(current or [])
    if variable.get("includeAll") and ALL_VALUE in wanted:
        return Selection((), True, tuple(options))
    kept = tuple(v for v in wanted if v in options)
    if kept:
        return Selection(kept if variable.get("multi") else kept[:1], False, tuple(options))
    if variable.get("includeAll"):
        return Selection((), True, tuple(options))
    return Selection(tuple(options[:1]), False, tuple(options))


def _given_selection(given: str | Sequence[str], options: Sequence[str]) -> Selection:
    values = [given] if isinstance(given, str) else list(given)
    if any(v in {ALL_VALUE, "All", "__all"} for v in values):
        return Selection((), True, tuple(options))
    return Selection(tuple(values), False, tuple(options) or tuple(values))


def _resolve_variables(runner: _Runner, dashboard: Dashboard, given: Mapping[str, str | Sequence[str]],
                      results: list[PanelResult]) -> dict[str, Selection]:
    """Every variable's selection, in definition order, so later queries can use earlier ones."""
    selections: dict[str, Selection] = {}
    definitions = {v["name"]: v for v in dashboard.variables if v.get("name")}
    for name, variable in definitions.items():
        text = {n: format_variable(s, definitions[n]) for n, s in selections.items()}
        options = _variable_options(runner, variable, text, dashboard.title, results)
        selections[name] = (_given_selection(given[name], options) if name in given
                            else default_selection(variable, options))
    return selections


def _repeat_scopes(repeat: str | None, selections: Mapping[str, Selection]) -> list[dict[str, Selection]]:
    """One scope per value of the repeat variable, each holding that single value (Grafana's clones)."""
    if not repeat or repeat not in selections:
        return [{}]
    values = selections[repeat].effective()
    return [{repeat: Selection((value,), False, (value,))} for value in values] or [{}]


def expand_panels(dashboard: Dashboard, selections: Mapping[str, Selection]) -> Iterator[tuple[dict[str, Any], dict[str, Selection]]]:
    """Every data panel as Grafana shows it: repeated rows and panels cloned per selected value."""
    for panel, row in iter_panels(dashboard.model):
        if panel.get("type") == "row":
            continue
        for row_scope in _repeat_scopes((row or {}).get("repeat"), selections):
            scoped = {**selections, **row_scope}
            for panel_scope in _repeat_scopes(panel.get("repeat"), scoped):
                yield panel, {**scoped, **panel_scope}


def _run_target(runner: _Runner, dashboard: Dashboard, panel: Mapping[str, Any], target: Mapping[str, Any],
                text: Mapping[str, str]) -> PanelResult:
    title = interpolate(str(panel.get("title", "")), text)
    try:
        datasource = runner.datasource(target.get("datasource", panel.get("datasource")))
    except QueryError as exc:
        return PanelResult(dashboard.title, title, str(target.get("refId", "")), "?", "", error=str(exc),
                           panel_id=panel.get("id"))
    interval_ms = runner.interval_ms(datasource, max_data_points(panel), panel.get("interval") or None)
    query = runner.fill(target_query(target, datasource.type), datasource, interval_ms, text)
    result = PanelResult(dashboard.title, title, str(target.get("refId", "")), datasource.uid, query,
                         panel_id=panel.get("id"))
    try:
        if datasource.type == "influxdb":
            series = influx_query(runner.settings, runner.database, query)
            return dataclasses.replace(result, series=len(series), points=influx_points(series))
        if datasource.type == "prometheus":
            instant = bool(target.get("instant")) and not target.get("range")
            count, points = prometheus_query(runner.settings, query, runner.time_range, interval_ms, instant)
            return dataclasses.replace(result, series=count, points=points)
        return dataclasses.replace(result, error=f"no runner for datasource type {datasource.type!r}")
    except QueryError as exc:
        return dataclasses.replace(result, error=str(exc))


def check_dashboards(settings: Settings, from_ms: int, to_ms: int,
                     variables: Mapping[str, str | Sequence[str]] | None = None, database: str | None = None, *,
                     dashboards: Sequence[Dashboard] | None = None,
                     datasources: Mapping[str, Datasource] | None = None) -> list[PanelResult]:
    """Run every variable query and every panel query of the dashboards against the stack.

    ``variables`` pins variables by name (a list for several values, ``$__all`` for All); the
    others are resolved like Grafana does on first load. ``database`` replaces the provisioned
    InfluxDB database (e.g. a test's private one). Errors are reported per result, not raised.
    """
    runner = _Runner(settings, database or settings.influx_database,
                     datasources if datasources is not None else load_datasources(), TimeRange(from_ms, to_ms))
    results: list[PanelResult] = []
    for dashboard in dashboards if dashboards is not None else load_dashboards():
        selections = _resolve_variables(runner, dashboard, variables or {}, results)
        definitions = {v["name"]: v for v in dashboard.variables if v.get("name")}
        for panel, scope in expand_panels(dashboard, selections):
            text = {name: format_variable(selection, definitions[name]) for name, selection in scope.items()}
            for target in panel.get("targets") or []:
                if isinstance(target, dict) and not target.get("hide"):
                    results.append(_run_target(runner, dashboard, panel, target, text))
    return results


# ------------------------------------------------------------------------------------ CLI
def list_queries(dashboards: Sequence[Dashboard], datasources: Mapping[str, Datasource]) -> list[str]:
    """One line per variable query and panel target, unfilled: what the dashboards ask for."""
    lines = []
    for dashboard in dashboards:
        for variable in dashboard.variables:
            if variable.get("type") == "query":
                lines.append(f"{dashboard.title} | variable {variable.get('name')} | "
                             f"{(variable.get('datasource') or {}).get('uid')} | {variable_query(variable)}")
        for panel, _row in iter_panels(dashboard.model):
            for target in panel.get("targets") or []:
                ref = target.get("datasource", panel.get("datasource")) or {}
                kind = datasources[ref["uid"]].type if ref.get("uid") in datasources else ""
                lines.append(f"{dashboard.title} | panel {panel.get('id')} {panel.get('title')!r} "
                             f"{target.get('refId')} | {ref.get('uid')} | {target_query(target, kind)}")
    return lines


def _parse_vars(pairs: Sequence[str]) -> dict[str, list[str]]:
    variables: dict[str, list[str]] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise SystemExit(f"--var expects name=value, not {pair!r}")
        variables.setdefault(name.strip(), []).append(value)
    return variables


def report(results: Sequence[PanelResult], *, require_data: bool, show_queries: bool) -> int:
    """Print one line per result; return how many failed (errors, or empty with require_data)."""
    failed = 0
    for r in results:
        bad = r.error is not None or (require_data and r.series == 0)
        failed += bad
        status = "ERROR" if r.error else ("EMPTY" if r.series == 0 else "ok")
        print(f"{status:<5} {r.dashboard} | {f'{r.panel} {r.ref_id}'.strip()} | {r.datasource} | series={r.series} "
              f"points={r.points}" + (f" | {r.error}" if r.error else ""))
        if show_queries or bad:
            print(f"      {r.query}")
    print(f"{len(results)} queries, {failed} failed")
    return failed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m streamkit.dashboards", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["validate", "list", "check"])
    parser.add_argument("--from-ms", type=int, help="start of the time range (default: an hour before --to-ms)")
    parser.add_argument("--to-ms", type=int, help="end of the time range (default: now)")
    parser.add_argument("--var", action="append", default=[], metavar="NAME=VALUE",
                        help="pin a template variable (repeat for several values; VALUE '$__all' for All)")
    parser.add_argument("--database", help="InfluxDB database instead of INFLUX_DATABASE")
    parser.add_argument("--require-data", action="store_true", help="fail when a query returns no series")
    parser.add_argument("--show-queries", action="store_true", help="print every filled query")
    settings, args = Settings.parse(argv, parser=parser)
    datasources = load_datasources()
    try:
        dashboards = load_dashboards()
    except ValueError as exc:
        print(f"invalid dashboard: {exc}", file=sys.stderr)
        return 1
    problems = validate_dashboards(dashboards, datasources)
    for problem in problems:
        print(f"PROBLEM {problem}")
    if args.action == "validate":
        print(f"{len(dashboards)} dashboards, {len(problems)} problems")
        return 1 if problems else 0
    if args.action == "list":
        print("\n".join(list_queries(dashboards, datasources)))
        return 1 if problems else 0
    to_ms = args.to_ms if args.to_ms is not None else int(time.time() * 1000)
    from_ms = args.from_ms if args.from_ms is not None else to_ms - 3_600_000
    variables = _parse_vars(args.var)
    defined = {v.get("name") for d in dashboards for v in d.variables}
    for name in sorted(set(variables) - defined):
        print(f"warning: no dashboard defines variable {name!r}", file=sys.stderr)
    results = check_dashboards(settings, from_ms, to_ms, variables, args.database, dashboards=dashboards,
                               datasources=datasources)
    failed = report(results, require_data=args.require_data, show_queries=args.show_queries)
    return 1 if problems or failed else 0


if __name__ == "__main__":
    sys.exit(main())
