"""The pipeline graph's text (stacktools.dashboards.graph.render) from snapshots made by hand:
flow order, a stage not running, the figures with their units, alerts on their stage or listed
apart, and Prometheus unreachable. Its figures from a real Prometheus are checked on the demo's
stack (tests/end_to_end/test_first_run.py)."""

from __future__ import annotations

from stacktools.dashboards.graph.collect import Alert, Node, Snapshot
from stacktools.dashboards.graph.render import render
from stacktools.dashboards.graph.stages import BRIDGE, CONNECTOR, SIMULATOR, spark_stage


def snapshot(alerts: list[Alert]) -> Snapshot:
    bridge = Node(BRIDGE, up=True, rate=3856.4, progress_age_s=0.24, dead_letters=0.0)
    bridge.extras = {"MQTT unacked": 12.0, "producer queue": 0.0}
    spark = Node(spark_stage("spark_single_pass"), up=False, rate=0.0, dead_letters=2.0)
    spark.extras = {"batch": 41.0, "committed": -1.0, "open transaction": 0.42}
    spark.alerts = [a for a in alerts if a.service == "spark_single_pass"]
    levels = [[Node(SIMULATOR)], [bridge], [spark], [Node(CONNECTOR, up=True)]]
    return Snapshot(0.0, levels, alerts)


def test_stages_in_flow_order_with_their_figures() -> None:
    text = render(snapshot([]))
    lines = [line for line in text.splitlines() if line and line[0].isalpha()]
    assert [line.split()[0] for line in lines[1:6]] == [
        "simulator",
        "mqtt_bridge",
        "spark_single_pass",
        "db_connector",
        "InfluxDB",
    ]
    assert lines[1] == "simulator          not scraped"
    assert "up    3,856 records/s  progress 0.2 s ago  MQTT unacked 12" in lines[2]
    assert (
        "down  0 rows/s  progress - s ago  batch 41  committed none  open transaction 0.4 s  "
        "dead letters 2"
    ) in lines[3]
    assert "up    - points/s  progress - s ago  dead letters -" in lines[4]  # no figure yet
    assert text.index("Kafka: the raw topic") < text.index("spark_single_pass")
    assert text.endswith("alerts: 0 firing, 0 pending")


def test_alerts_sit_on_their_stage_and_the_others_are_listed() -> None:
    alerts = [
        Alert("StageStalled", "firing", "spark_single_pass"),
        Alert("KafkaDiskNearlyFull", "pending", ""),
    ]
    text = render(snapshot(alerts))
    spark_line = next(line for line in text.splitlines() if line.startswith("spark_single"))
    assert spark_line.endswith("ALERTS StageStalled (firing)")
    assert "alerts: 1 firing, 1 pending\n  KafkaDiskNearlyFull (pending)" in text
    assert "StageStalled (firing) on" not in text  # shown once, on its stage


def test_no_spark_job_and_no_prometheus() -> None:
    empty = Snapshot(0.0, [[Node(SIMULATOR)], [Node(BRIDGE)], [], [Node(CONNECTOR)]], [], "down")
    text = render(empty)
    assert "no figures: down" in text and "(no Spark job ran in the last hour)" in text
