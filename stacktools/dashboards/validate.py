"""The structural check: what Grafana 11.6 needs to provision and render a dashboard.

Schema version, unique uids and panel ids, grid positions, datasource uids that exist in
provisioning, well-formed targets and variables, repeats and ``$variables`` that refer to
something. Problems come back as readable sentences instead of exceptions, so one run
reports all of them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from stacktools.dashboards.macros import variable_references
from stacktools.dashboards.model import (
    GRID_COLUMNS,
    Dashboard,
    Datasource,
    iter_panels,
    target_query,
    variable_query,
)
from stacktools.dashboards.variables import js_regex

#: Grafana 11.6's dashboard schema version (11.5 wrote 40; 11.6 migrates everything to 41). A
#: file with an older number is migrated on every load, a newer one may not load at all.
SCHEMA_VERSION = 41
REQUIRED_KEYS: tuple[str, ...] = (
    "uid",
    "title",
    "schemaVersion",
    "time",
    "panels",
    "templating",
    "annotations",
)
#: Panel types shipped with Grafana 11.6 that these dashboards may use (no external plugins).
PANEL_TYPES = frozenset(
    {
        "timeseries",
        "stat",
        "gauge",
        "bargauge",
        "table",
        "text",
        "row",
        "state-timeline",
        "status-history",
        "barchart",
        "histogram",
        "heatmap",
        "piechart",
        "logs",
        "nodeGraph",
    }
)
#: The transformations a node graph panel may use: those stacktools.dashboards.nodegraph models,
#: so that the checker can tell whether Grafana will draw the graph.
NODE_GRAPH_TRANSFORMATIONS = frozenset({"labelsToFields", "merge", "organize"})
VARIABLE_TYPES = frozenset(
    {"query", "custom", "constant", "interval", "textbox", "datasource", "adhoc"}
)
#: Macros and global variables Grafana fills itself; a query may use them without defining them.
BUILTIN_VARIABLES = frozenset(
    {
        "timeFilter",
        "__timeFilter",
        "interval",
        "__interval",
        "__interval_ms",
        "__rate_interval",
        "__rate_interval_ms",
        "__range",
        "__range_s",
        "__range_ms",
        "__from",
        "__to",
        "__dashboard",
        "__org",
        "__user",
    }
)


def _datasource_problems(where: str, ref: Any, datasources: Mapping[str, Datasource]) -> list[str]:
    if not isinstance(ref, dict) or not ref.get("uid"):
        return [f"{where}: datasource must be an object with a uid (one of {sorted(datasources)})"]
    known = datasources.get(ref["uid"])
    if known is None:
        return [
            f"{where}: unknown datasource uid {ref['uid']!r} (provisioned: {sorted(datasources)})"
        ]
    if ref.get("type") not in (None, known.type):
        return [
            f"{where}: datasource {ref['uid']!r} is of type {known.type!r}, not {ref.get('type')!r}"
        ]
    return []


def _reference_problems(where: str, text: str, known: set[str] | frozenset[str]) -> list[str]:
    unknown = sorted({name for name in variable_references(text) if name not in known})
    return [f"{where}: undefined variable ${name}" for name in unknown]


def _check_top_level(model: Mapping[str, Any]) -> list[str]:
    problems = [f"missing top-level key {key!r}" for key in REQUIRED_KEYS if key not in model]
    uid = model.get("uid")
    if "uid" in model and not (isinstance(uid, str) and re.fullmatch(r"[A-Za-z0-9_-]{1,40}", uid)):
        problems.append(f"uid {uid!r} must be 1-40 letters, digits, '-' or '_'")
    if "schemaVersion" in model and model.get("schemaVersion") != SCHEMA_VERSION:
        problems.append(
            f"schemaVersion is {model.get('schemaVersion')!r}, Grafana 11.6 uses {SCHEMA_VERSION}"
        )
    if model.get("id") is not None:
        problems.append("id must be null in a provisioned dashboard (Grafana assigns it)")
    time_range = model.get("time")
    if "time" in model and not (
        isinstance(time_range, dict) and time_range.get("from") and time_range.get("to")
    ):
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
    if (
        grid["w"] < 1
        or grid["h"] < 1
        or grid["x"] < 0
        or grid["y"] < 0
        or grid["x"] + grid["w"] > GRID_COLUMNS
    ):
        return [f"{where}: gridPos {grid} is outside the {GRID_COLUMNS}-column grid"]
    return []


def _check_overlaps(panels: Sequence[Mapping[str, Any]]) -> list[str]:
    """Overlapping panels are silently moved by Grafana; the file should say where they are."""
    boxes = [
        (p, p["gridPos"])
        for p in panels
        if isinstance(p.get("gridPos"), dict)
        and all(isinstance(p["gridPos"].get(k), int) for k in ("h", "w", "x", "y"))
    ]
    problems = []
    for i, (first, a) in enumerate(boxes):
        for second, b in boxes[i + 1 :]:
            if (
                a["x"] < b["x"] + b["w"]
                and b["x"] < a["x"] + a["w"]
                and a["y"] < b["y"] + b["h"]
                and b["y"] < a["y"] + a["h"]
            ):
                problems.append(
                    f"panels {first.get('id')} and {second.get('id')} overlap ({a} / {b})"
                )
    return problems


def _check_target(
    where: str, target: Any, panel_ds: Any, datasources: Mapping[str, Datasource], known: set[str]
) -> list[str]:
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
        problems.append(
            f"{where}: no query ({'expr' if kind == 'prometheus' else 'query'} is empty)"
        )
    if kind == "influxdb" and target.get("rawQuery") is not True:
        problems.append(f"{where}: InfluxQL targets must be raw queries (rawQuery: true)")
    return problems + _reference_problems(where, query, known)


def _check_panel(
    panel: Mapping[str, Any],
    datasources: Mapping[str, Datasource],
    variables: Mapping[str, Any],
    known: set[str],
) -> list[str]:
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
            problems.append(
                f"{where}: repeat variable {repeat!r} allows one value only (set multi or "
                "includeAll)"
            )
        if panel.get("repeatDirection", "h") not in {"h", "v"}:
            problems.append(f"{where}: repeatDirection must be 'h' or 'v'")
    if panel.get("type") == "row":
        return problems
    problems += _datasource_problems(where, panel.get("datasource"), datasources)
    targets = panel.get("targets")
    if not isinstance(targets, list) or not targets:
        return problems + [f"{where}: no targets"]
    ref_ids = [t.get("refId") for t in targets if isinstance(t, dict)]
    problems += [
        f"{where}: duplicate refId {r!r}"
        for r in sorted({r for r in ref_ids if r and ref_ids.count(r) > 1})
    ]
    for target in targets:
        problems += _check_target(where, target, panel.get("datasource"), datasources, known)
    if panel.get("type") == "nodeGraph":
        problems += _check_node_graph(where, panel)
    return problems


def _check_node_graph(where: str, panel: Mapping[str, Any]) -> list[str]:
    """A node graph draws one instant: its targets must be instant queries, in the format and
    with the transformations the checker's model knows."""
    problems = []
    for target in panel.get("targets") or []:
        if isinstance(target, dict) and not (target.get("instant") and not target.get("range")):
            problems.append(f"{where} target {target.get('refId')}: must be an instant query")
        if isinstance(target, dict) and target.get("format", "time_series") != "time_series":
            problems.append(f"{where} target {target.get('refId')}: format must be time_series")
    for transformation in panel.get("transformations") or []:
        if transformation.get("id") not in NODE_GRAPH_TRANSFORMATIONS:
            problems.append(
                f"{where}: transformation {transformation.get('id')!r} is not modelled "
                f"(allowed: {sorted(NODE_GRAPH_TRANSFORMATIONS)})"
            )
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
        if (
            kind in {"query", "custom", "constant", "interval"}
            and not variable_query(variable).strip()
        ):
            problems.append(f"{where}: empty query")
        if kind == "query":
            problems += _datasource_problems(where, variable.get("datasource"), datasources)
            if variable.get("refresh") not in (1, 2):
                problems.append(f"{where}: refresh must be 1 (on load) or 2 (on time range change)")
            # Variables may only use variables defined before them, like Grafana's dependency order.
            problems += _reference_problems(
                where, variable_query(variable), seen - {name} | BUILTIN_VARIABLES
            )
        if variable.get("regex"):
            try:
                js_regex(str(variable["regex"]))
            except (re.error, ValueError) as exc:
                problems.append(f"{where}: bad regex {variable['regex']!r}: {exc}")
    return problems


def validate_dashboard(
    model: Mapping[str, Any], datasources: Mapping[str, Datasource]
) -> list[str]:
    """Every structural problem of one dashboard, as readable sentences (empty: fine)."""
    problems = _check_top_level(model)
    variables = [
        v for v in (model.get("templating") or {}).get("list") or [] if isinstance(v, dict)
    ]
    problems += _check_variables(variables, datasources)
    by_name = {name: v for v in variables if (name := v.get("name"))}
    known = set(by_name) | BUILTIN_VARIABLES
    panels = [panel for panel, _ in iter_panels(model)]
    ids = [p.get("id") for p in panels]
    problems += [
        f"duplicate panel id {i}"
        for i in sorted({i for i in ids if isinstance(i, int) and ids.count(i) > 1})
    ]
    for panel in panels:
        problems += _check_panel(panel, datasources, by_name, known)
    top_level = [p for p in model.get("panels") or [] if isinstance(p, dict)]
    return problems + _check_overlaps(top_level)


def validate_dashboards(
    dashboards: Sequence[Dashboard], datasources: Mapping[str, Datasource]
) -> list[str]:
    """Problems of every dashboard, prefixed with its file, plus uids or titles used twice."""
    problems: list[str] = []
    for key in ("uid", "title"):
        owners: dict[Any, list[str]] = {}
        for dashboard in dashboards:
            owners.setdefault(dashboard.model.get(key), []).append(dashboard.path.name)
        problems += [
            f"{key} {value!r} is used by {', '.join(files)}"
            for value, files in owners.items()
            if value is not None and len(files) > 1
        ]
    for dashboard in dashboards:
        problems += [
            f"{dashboard.path.name}: {problem}"
            for problem in validate_dashboard(dashboard.model, datasources)
        ]
    return problems
