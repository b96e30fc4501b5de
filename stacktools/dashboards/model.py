"""What Grafana provisions: the datasources, the dashboard files, and their panels as shown.

Loading, panel iteration and the expansion of repeated rows and panels live together because
they describe the dashboards themselves; validating and running them are separate modules.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from stacktools.dashboards.intervals import parse_interval_ms
from stacktools.resources import DASHBOARD_DIR, DATASOURCES_FILE

#: Grafana's dashboard grid is 24 columns wide whatever the screen.
GRID_COLUMNS = 24


@dataclasses.dataclass(frozen=True)
class Datasource:
    """One provisioned datasource: what a dashboard may refer to by uid."""

    uid: str
    type: str
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

    @property
    def annotation_queries(self) -> list[dict[str, Any]]:
        """The annotations that query a datasource (Grafana's built-in one, the dashboard's own
        annotations and alerts, has no query to run)."""
        annotations = self.model.get("annotations") or {}
        found = annotations.get("list") or [] if isinstance(annotations, dict) else []
        return [a for a in found if isinstance(a, dict) and not a.get("builtIn")]

    @property
    def variables_by_name(self) -> dict[str, dict[str, Any]]:
        """The named variables in definition order (the order Grafana resolves them in)."""
        return {v["name"]: v for v in self.variables if v.get("name")}


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


def load_datasources(path: Path = DATASOURCES_FILE) -> dict[str, Datasource]:
    """The datasources Grafana provisions, by uid: the only ones a dashboard can use."""
    config = yaml.safe_load(path.read_text()) or {}
    found: dict[str, Datasource] = {}
    for entry in config.get("datasources") or []:
        interval = (entry.get("jsonData") or {}).get("timeInterval") or "1s"
        found[entry["uid"]] = Datasource(
            uid=entry["uid"], type=entry["type"], time_interval_ms=parse_interval_ms(interval)
        )
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


def target_query(target: Mapping[str, Any], datasource_type: str) -> str:
    """The query text of a target: ``query`` for InfluxQL, ``expr`` for PromQL."""
    return str(target.get("expr" if datasource_type == "prometheus" else "query") or "")


def variable_query(variable: Mapping[str, Any]) -> str:
    """A variable's query: Grafana stores it as a string or as ``{"query": ...}``."""
    query = variable.get("query")
    if isinstance(query, dict):
        query = query.get("query")
    return str(query or "")


def _repeat_scopes(
    repeat: str | None, selections: Mapping[str, Selection]
) -> list[dict[str, Selection]]:
    """One scope per value of the repeat variable, each holding that single value (Grafana's
    clones)."""
    if not repeat or repeat not in selections:
        return [{}]
    values = selections[repeat].effective()
    return [{repeat: Selection((value,), False, (value,))} for value in values] or [{}]


def expand_panels(
    dashboard: Dashboard, selections: Mapping[str, Selection]
) -> Iterator[tuple[dict[str, Any], dict[str, Selection]]]:
    """Every data panel as Grafana shows it: repeated rows and panels cloned per selected value."""
    for panel, row in iter_panels(dashboard.model):
        if panel.get("type") == "row":
            continue
        for row_scope in _repeat_scopes((row or {}).get("repeat"), selections):
            scoped = {**selections, **row_scope}
            for panel_scope in _repeat_scopes(panel.get("repeat"), scoped):
                yield panel, {**scoped, **panel_scope}
