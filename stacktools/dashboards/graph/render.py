"""The graph as text: one line per stage in flow order, the hop between stages under it, every
figure with its unit, and '-' where Prometheus has none (a stage not running, or not yet
measured)."""

from __future__ import annotations

import time

from stacktools.dashboards.graph.collect import Node, Snapshot
from stacktools.dashboards.graph.stages import HOPS, OPEN_TRANSACTION


def _number(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _figure(label: str, value: float | None) -> str:
    """A batch id below 0 is the sink's 'nothing committed yet'; no open transaction has no
    age."""
    if label == OPEN_TRANSACTION:
        return f"{label} {'none' if value is None else f'{value:.1f} s'}"
    if label in ("batch", "committed") and value is not None and value < 0:
        return f"{label} none"
    return f"{label} {_number(value)}"


def node_line(node: Node) -> str:
    stage = node.stage
    if node.up is None:
        return f"{stage.service:<18} not scraped"
    parts = [
        f"{stage.service:<18} {'up' if node.up else 'down':<4}",
        f"{_number(node.rate)} {stage.unit}/s",
        f"progress {_number(node.progress_age_s, 1)} s ago",
        *(_figure(label, value) for label, value in node.extras.items()),
        f"dead letters {_number(node.dead_letters)}",
    ]
    if node.alerts:
        parts.append("ALERTS " + ", ".join(f"{a.name} ({a.state})" for a in node.alerts))
    return "  ".join(parts)


def render(snapshot: Snapshot) -> str:
    clock = time.strftime("%H:%M:%S", time.localtime(snapshot.taken_at))
    lines = [f"pipeline at {clock}"]
    if snapshot.error:
        lines.append(f"no figures: {snapshot.error}")
    for level, hop in zip(snapshot.levels, HOPS, strict=True):
        nodes = level or []
        if not nodes:
            lines.append("(no Spark job ran in the last hour)")
        lines += [node_line(node) for node in nodes]
        lines.append(f"   | {hop}")
    lines.append("InfluxDB")
    unplaced = [
        a for a in snapshot.alerts if not any(a in n.alerts for lv in snapshot.levels for n in lv)
    ]
    firing = sum(1 for a in snapshot.alerts if a.state == "firing")
    lines.append(f"alerts: {firing} firing, {len(snapshot.alerts) - firing} pending")
    lines += [f"  {a.name} ({a.state}){f' on {a.service}' if a.service else ''}" for a in unplaced]
    return "\n".join(lines)
