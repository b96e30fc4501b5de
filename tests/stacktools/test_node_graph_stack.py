"""The pipeline graph panel's queries on the real Prometheus of the local stack, whatever runs
(nothing, or a demo's services): through the dashboards checker, and through the model of
Grafana's transformations (tests/stacktools/test_node_graph_panel.py cites its sources), every
stage is a node exactly once, edges join nodes, and a stage Prometheus does not see as up is
drawn as down."""

from __future__ import annotations

import time

import pytest

from stacktools.dashboards import TimeRange, check_dashboards, load_dashboards, prometheus_api
from stacktools.dashboards.graph.panel import PANEL_TITLE, dashboard_panel
from stacktools.dashboards.graph.stages import SINK, node_ids
from stacktools.dashboards.macros import fill_query
from stacktools.dashboards.nodegraph import (
    apply_transformations,
    categorize,
    instant_frames,
    panel_problems,
)
from stacktools.dashboards.settings import DashboardSettings
from stacktools.stack.settings import Settings

pytestmark = pytest.mark.stack


def test_the_checker_runs_the_node_graph_and_its_contract(stack_settings: Settings) -> None:
    now_ms = int(time.time() * 1000)
    health = [d for d in load_dashboards() if d.path.name == "pipeline-health.json"]
    results = [
        r
        for r in check_dashboards(
            DashboardSettings.of(stack_settings), now_ms - 3_600_000, now_ms, dashboards=health
        )
        if r.panel == PANEL_TITLE
    ]
    assert [r.ref_id for r in results] == ["nodes", "edges", "node-graph"]
    assert all(r.ok for r in results), [r.error for r in results]
    nodes, edges, contract = results
    assert edges.series == len(node_ids()) + 1  # 1 + 3 + 3 + 1 edges for 7 nodes
    assert contract.series == nodes.series + edges.series


def test_every_stage_is_a_node_and_what_is_not_up_is_down(stack_settings: Settings) -> None:
    panel = dashboard_panel()
    now_ms = int(time.time() * 1000)
    answers = {
        t["refId"]: prometheus_api.instant(
            stack_settings,
            fill_query(
                t["expr"], TimeRange(now_ms - 3_600_000, now_ms), 5_000, 5_000, {}, "prometheus"
            ),
        )
        for t in panel["targets"]
    }
    assert panel_problems(panel, answers, now_ms, node_ids()) == []
    frames = [
        f for t in panel["targets"] for f in instant_frames(t["refId"], answers[t["refId"]], 0)
    ]
    (node_frame,), _ = categorize(apply_transformations(frames, panel["transformations"]))
    table = {f.name: f.values for f in node_frame.fields}
    up = {
        labels["service"]
        for labels, value in prometheus_api.instant(
            stack_settings, 'max by (service) (up{service!=""})'
        )
        if value == 1
    }
    for row, node in enumerate(table["id"]):
        if node != SINK:
            assert table["arc__down"][row] == (0.0 if node in up else 1.0), (node, up)
        assert table["arc__ok"][row] + table["arc__alerting"][row] + table["arc__down"][row] == 1
