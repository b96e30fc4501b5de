"""The pipeline graph as a Grafana Node graph panel, generated from the same stages and levels as
``stack status --pipeline`` so the two cannot drift apart; the pipeline-health dashboard holds
the result and a test compares the two (``update_dashboard()`` rewrites it).

Grafana's node graph reads fields by their *name* (``id``, ``title``, ``mainstat``, ``arc__*``,
``source``, ``target``: see docs/dashboards.md for the sources). A Prometheus query cannot name
a value column, and the organize/rename transformations only set a display name, so every
figure is a series carrying a ``stat`` label: "Labels to fields" with ``valueLabel: stat`` makes
that label the value field's name and the other labels (``id``, ``title``...) string fields,
then "Merge" (once for the nodes query, once for the edges query) makes one row per node and
one per edge. Every figure falls back to a constant, so a stage that is not running is still a
node (drawn as down)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from stacktools.dashboards.graph.stages import (
    BRIDGE,
    CONNECTOR,
    OPEN_TRANSACTION,
    RATE_WINDOW,
    SIMULATOR,
    SINK,
    SPARK_JOBS,
    Stage,
    edges,
    node_ids,
    spark_stage,
)
from stacktools.resources import DASHBOARD_DIR

DASHBOARD = DASHBOARD_DIR / "pipeline-health.json"
PANEL_ID = 24
PANEL_TITLE = "Pipeline graph"
#: The label whose value becomes the value field's name ("Labels to fields", valueLabel).
STAT_LABEL = "stat"
NODES_REF = "nodes"
EDGES_REF = "edges"
#: The health ring: exactly one of these is 1 for every node (Grafana draws a full circle in
#: that arc's colour), the others 0.
ARCS = {"arc__ok": "green", "arc__alerting": "orange", "arc__down": "red"}


def _for_grafana(expr: str) -> str:
    """The terminal view's rate window becomes Grafana's ``$__rate_interval``, like in every
    other panel of the dashboards."""
    window = f"[{RATE_WINDOW}]"
    if "rate(" in expr and window not in expr:
        raise ValueError(f"a rate without the {window} window: {expr}")
    return expr.replace(window, "[$__rate_interval]")


def _label(expr: str, name: str, value: str) -> str:
    """``expr`` with the label ``name`` set to ``value`` on every series (label_replace of an
    empty source label, which always matches ``""``)."""
    return f'label_replace({expr}, "{name}", "{value}", "", "")'


def _firing(selector: str) -> str:
    """1 while an alert matching ``selector`` fires, else 0."""
    return f'(count(ALERTS{{alertstate="firing", {selector}}}) > bool 0 or vector(0))'


def _sum_of(*exprs: str) -> str:
    return " + ".join(f"({e})" for e in exprs)


def _node_stats(node: str) -> tuple[str, dict[str, str]]:
    """(subtitle, {stat: PromQL}) of one node: every expression gives one label-less sample, a
    constant when the figure does not exist (a stage not running)."""
    if node == SINK:
        up = "(min(connector_influx_available) or vector(0))"
        alerting = _firing('alertname=~"InfluxWrites.+"')
        stats = {
            "mainstat": CONNECTOR.rate,
            "secondarystat": CONNECTOR.extras["pending"],
            "detail__alerts_firing": _count_firing('alertname=~"InfluxWrites.+"'),
        }
        subtitle = "points/s written · pending points"
    else:
        stage, subtitle, backlog = _service_stage(node)
        up = f'(max(up{{service="{node}"}}) or vector(0))'
        alerting = _firing(f'service="{node}"')
        stats = {
            "mainstat": stage.rate,
            "secondarystat": backlog,
            "detail__progress_age_s": (
                f'time() - max(service_last_progress_timestamp_seconds{{service="{node}"}})'
            ),
            "detail__dead_letters": stage.dead_letters,
            "detail__alerts_firing": _count_firing(f'service="{node}"'),
        }
        if OPEN_TRANSACTION in stage.extras:
            stats["detail__open_transaction_s"] = stage.extras[OPEN_TRANSACTION]
    stats |= {
        "arc__ok": f"{up} * (1 - {alerting})",
        "arc__alerting": f"{up} * {alerting}",
        "arc__down": f"1 - {up}",
    }
    return subtitle, {stat: _for_grafana(expr) for stat, expr in stats.items()}


def _count_firing(selector: str) -> str:
    return f'count(ALERTS{{alertstate="firing", {selector}}}) or vector(0)'


def _service_stage(service: str) -> tuple[Stage, str, str]:
    """(stage, subtitle, backlog PromQL) of a service node."""
    if service == SIMULATOR.service:
        published = 'sum(simulator_rows_published_total{service="simulator"})'
        acked = 'sum(simulator_rows_acked_total{service="simulator"})'
        return SIMULATOR, "rows/s · unacked rows", f"{published} - {acked} or vector(0)"
    if service == BRIDGE.service:
        backlog = _sum_of(BRIDGE.extras["MQTT unacked"], BRIDGE.extras["producer queue"])
        return BRIDGE, "records/s · unacked + queued", backlog
    if service == CONNECTOR.service:
        return CONNECTOR, "points/s · consumer lag", CONNECTOR.extras["lag"]
    if service in SPARK_JOBS:
        # Spark exports no consumer lag: what the bridges wrote to the raw topic and this job
        # has not read yet, while the job is up (its counter appears at its first batch; a
        # restart of either resets a counter: clamped at 0). Event-time lag would be years for
        # a replayed file.
        read = f'(sum(spark_input_rows_total{{service="{service}"}}) or vector(0))'
        unread = (
            f"clamp_min(sum(bridge_records_total) - {read}, 0)"
            f' and on() max(up{{service="{service}"}}) > 0 or vector(0)'
        )
        return spark_stage(service), "rows/s · raw records unread", unread
    raise ValueError(f"no stage {service!r} in the graph")


def _title(node: str) -> str:
    return "InfluxDB" if node == SINK else node


def nodes_query() -> str:
    """Every node: one series per (node, figure), labelled id, title, subtitle and stat."""
    parts = []
    for node in node_ids():
        subtitle, stats = _node_stats(node)
        figures = " or ".join(_label(expr, STAT_LABEL, stat) for stat, expr in stats.items())
        labelled = _label(
            _label(_label(figures, "id", node), "title", _title(node)), "subtitle", subtitle
        )
        parts.append(labelled)
    return "\nor\n".join(parts)


def _input_rate(node: str) -> str:
    """What flows into ``node`` per second: its own rate (the sink's is the connector's)."""
    return CONNECTOR.rate if node == SINK else _service_stage(node)[0].rate


def edges_query() -> str:
    """Every edge: its id, source, target and hop (a text), the target's rate as the figure."""
    parts = []
    for source, target, hop in edges():
        expr = _label(_for_grafana(_input_rate(target)), STAT_LABEL, "mainstat")
        for name, value in (
            ("id", f"{source}->{target}"),
            ("source", source),
            ("target", target),
            ("secondarystat", hop),
        ):
            expr = _label(expr, name, value)
        parts.append(expr)
    return "\nor\n".join(parts)


def _target(ref_id: str, expr: str) -> dict[str, Any]:
    return {
        "datasource": {"type": "prometheus", "uid": "prometheus"},
        "editorMode": "code",
        "expr": expr,
        "format": "time_series",
        "instant": True,
        "range": False,
        "refId": ref_id,
    }


#: Grafana's transformations, in order; stacktools.dashboards.nodegraph models exactly these.
TRANSFORMATIONS: list[dict[str, Any]] = [
    {"id": "labelsToFields", "options": {"mode": "columns", "valueLabel": STAT_LABEL}},
    {"id": "merge", "filter": {"id": "byRefId", "options": NODES_REF}, "options": {}},
    {"id": "merge", "filter": {"id": "byRefId", "options": EDGES_REF}, "options": {}},
]


def node_graph_panel(grid: dict[str, int]) -> dict[str, Any]:
    """The panel as the dashboard file holds it, placed at ``grid``."""
    return {
        "datasource": {"type": "prometheus", "uid": "prometheus"},
        "description": (
            "Every stage of the pipeline in flow order (the same graph as `stack status "
            "--pipeline`): inside each node its rate and its backlog or lag (the subtitle says "
            "which), the ring green when up, orange with an alert firing, red when down or not "
            "running; click a node for seconds since its last progress, dead letters and "
            "alerts. Edges are the hops, with what flows into their target per second."
        ),
        "fieldConfig": {"defaults": {}, "overrides": []},
        "gridPos": dict(grid),
        "id": PANEL_ID,
        "options": {
            "edges": {},
            "nodes": {"arcs": [{"field": f, "color": c} for f, c in ARCS.items()]},
        },
        "targets": [_target(NODES_REF, nodes_query()), _target(EDGES_REF, edges_query())],
        "title": PANEL_TITLE,
        "transformations": TRANSFORMATIONS,
        "type": "nodeGraph",
    }


def dashboard_panel(path: Path = DASHBOARD) -> dict[str, Any]:
    """The node graph panel as the dashboard file holds it now."""
    model = json.loads(path.read_text())
    return next(p for p in model["panels"] if p.get("id") == PANEL_ID)


def update_dashboard(path: Path = DASHBOARD) -> None:
    """Rewrite the dashboard's node graph panel from the stages (after changing them)."""
    model = json.loads(path.read_text())
    for index, panel in enumerate(model["panels"]):
        if panel.get("id") == PANEL_ID:
            model["panels"][index] = node_graph_panel(panel["gridPos"])
    path.write_text(json.dumps(model, indent=2) + "\n")
