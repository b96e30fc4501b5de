"""The graph's figures now, from the stack's Prometheus: a few instant queries per stage and the
alerts it holds. Nothing here computes a rate itself: what is shown is what an alert rule or a
dashboard would see."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from stacktools.dashboards import prometheus_api
from stacktools.dashboards.errors import PrometheusError
from stacktools.dashboards.graph.stages import (
    BRIDGE,
    CONNECTOR,
    PROGRESS_AGE,
    SIMULATOR,
    SPARK_RAN,
    UP,
    Stage,
    spark_stage,
)
from streamkit.config import PrometheusSettings


@dataclass(frozen=True)
class Alert:
    name: str
    state: str  #: firing or pending
    service: str  #: '' when the alert names no service


@dataclass
class Node:
    stage: Stage
    #: None: Prometheus does not scrape it (not running in this shape, or never started)
    up: bool | None = None
    rate: float | None = None
    progress_age_s: float | None = None
    dead_letters: float | None = None
    extras: dict[str, float | None] = field(default_factory=dict)
    alerts: list[Alert] = field(default_factory=list)


@dataclass
class Snapshot:
    taken_at: float
    #: the graph's levels in flow order; the Spark jobs of a level read the same raw topic
    levels: list[list[Node]]
    alerts: list[Alert]
    #: why there are no figures (Prometheus unreachable), else ''
    error: str = ""


def _value(settings: PrometheusSettings, expr: str) -> float | None:
    result = prometheus_api.instant(settings, expr)
    return result[0][1] if result else None


def _by_service(settings: PrometheusSettings, expr: str) -> dict[str, float]:
    return {
        labels.get("service", ""): value for labels, value in prometheus_api.instant(settings, expr)
    }


def _alerts(settings: PrometheusSettings) -> list[Alert]:
    data = prometheus_api.call(settings, "/api/v1/alerts")
    return sorted(
        (
            Alert(
                alert["labels"].get("alertname", "?"),
                alert.get("state", "?"),
                alert["labels"].get("service", alert["labels"].get("job", "")),
            )
            for alert in (data or {}).get("alerts", [])
        ),
        key=lambda a: (a.service, a.name),
    )


def snapshot(settings: PrometheusSettings) -> Snapshot:
    """Every stage's figures now; a Prometheus that does not answer gives the graph's shape
    with no figure and the reason."""
    try:
        up = _by_service(settings, UP)
    except PrometheusError as exc:
        levels = [[Node(SIMULATOR)], [Node(BRIDGE)], [], [Node(CONNECTOR)]]
        return Snapshot(time.time(), levels, [], str(exc))
    ages = _by_service(settings, PROGRESS_AGE)
    alerts = _alerts(settings)
    spark = sorted(_by_service(settings, SPARK_RAN))
    stages = [[SIMULATOR], [BRIDGE], [spark_stage(name) for name in spark], [CONNECTOR]]
    levels = []
    for level in stages:
        nodes = []
        for stage in level:
            node = Node(stage, up=None if stage.service not in up else up[stage.service] > 0)
            if node.up is not None:
                node.rate = _value(settings, stage.rate)
                node.dead_letters = _value(settings, stage.dead_letters)
                node.progress_age_s = ages.get(stage.service)
                node.extras = {label: _value(settings, e) for label, e in stage.extras.items()}
            node.alerts = [a for a in alerts if a.service == stage.service]
            nodes.append(node)
        levels.append(nodes)
    return Snapshot(time.time(), levels, alerts)
