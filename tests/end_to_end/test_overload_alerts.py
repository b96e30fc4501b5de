"""An overload of a machine reaches a webhook once, through the real stack: the single pass
fires the alert in the overloads topic, the alert forwarder posts it to the launcher's
Alertmanager, which notifies the test's webhook. The forwarder and the pass are killed with
SIGKILL and restarted after the alert landed; the machine then runs under its rating again, and
the webhook hears the alert resolved. Firing once, resolved once, and the topic holds exactly
the two events (docs/operation-statistics.md, overload alerts)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from stacktools.dashboards import check_dashboards, load_dashboards
from stacktools.dashboards.settings import DashboardSettings
from stacktools.harness.pipeline import Pipeline
from stacktools.harness.wiring import Wiring
from stacktools.stack.influx import InfluxClient
from stacktools.stack.settings import Settings
from streamkit.kafka_io import read_to_end
from streamkit.wire import AvroCodec
from streamkit.wire.retention import source
from tests.support.waits import settle
from tests.support.webhook import Webhook

pytestmark = [pytest.mark.stack, pytest.mark.spark]
THING, COMPONENT = "M9", "C11"
ROW_MS, CYCLE_S = 2_000, 60
#: Alertmanager's group_interval (stacktools.stack.servers.alertmanager.ALERT_ROUTE_TIMING)
#: and more: long enough for a second notification, had there been a reason for one.
QUIET_S = 45


def rows(start_ms: int, first_s: int, last_s: int, overloaded: bool) -> list[dict]:
    """1000 rpm with 19 Nm (2 kW, a tenth of the default 20 kW rating) or 290 Nm (30 kW)."""
    torque = 290.0 if overloaded else 19.0
    return [
        {
            "Thing": THING,
            "Timestamp": start_ms + t * 1000,
            "actSpeed_C11": 1000.0,
            "vaTorque_C11": torque,
            "id": f"r{t}",
        }
        for t in range(first_s, last_s, ROW_MS // 1000)
    ]


def write(path: Path, items: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in items))
    return path


def notified(hook: Webhook, status: str) -> list[dict]:
    with hook._lock:
        return [
            a
            for a in hook.alerts
            if a["status"] == status
            and a["labels"].get("alertname") == "ComponentOverload"
            and a["labels"].get("thing") == THING
        ]


def test_an_overload_alert_reaches_the_webhook_once_through_kills(
    stack_settings: Settings,
    webhook: Webhook,
    tmp_path: Path,
) -> None:
    settings = stack_settings
    # an hour ago, on a minute: cycles [0, 60 s) ... of the run's own time line
    start_ms = (int(time.time() * 1000) - 3_600_000) // 60_000 * 60_000
    first = write(
        tmp_path / "first.json",
        rows(start_ms, 0, 180, False) + rows(start_ms, 180, 360, True),
    )
    second = write(tmp_path / "second.json", rows(start_ms, 360, 600, False))
    wiring = Wiring.private(settings)
    pipeline = Pipeline(
        settings,
        wiring,
        tmp_path / "run",
        extra_args={
            "spark_single_pass": [
                "--shuffle-partitions",
                "2",
                "--opstats-cycle",
                f"{CYCLE_S}s",
                "--opstats-max-hold",
                "10s",
            ],
            "db_connector": ["--flush-interval", "500ms"],
            "alert_forwarder": ["--resend", "5s"],
        },
    )
    try:
        pipeline.start_stages()
        pipeline.start("alert_forwarder")
        pipeline.wait_ready()
        assert pipeline.replay(first, "--order", "file").popen.wait(120) == 0

        # the cycles from 180 s on are overloaded: the one of 180 s fires, once 240 s is past
        fired = settle(lambda: notified(webhook, "firing"), 180, "the overload alert")
        assert fired, pipeline.log("alert_forwarder").read_text()[-2000:]
        (alert,) = notified(webhook, "firing")
        assert alert["labels"]["component"] == COMPONENT
        assert alert["startsAt"].startswith(
            time.strftime("%Y-%m-%dT%H:%M", time.gmtime((start_ms + 180_000) / 1000))
        )
        assert "duty" in alert["annotations"]["summary"]

        for name in ("alert_forwarder", "spark_single_pass"):  # the alert is re-posted
            pipeline.kill9(name)
            pipeline.restart(name)
        pipeline.services["spark_single_pass"].wait_logged('"query running"', 300)
        assert pipeline.replay(second, "--order", "file").popen.wait(120) == 0

        resolved = settle(lambda: notified(webhook, "resolved"), 180, "the alert resolved")
        assert resolved, pipeline.log("alert_forwarder").read_text()[-2000:]
        time.sleep(QUIET_S)
        assert len(notified(webhook, "firing")) == 1, notified(webhook, "firing")
        assert len(notified(webhook, "resolved")) == 1, notified(webhook, "resolved")

        codec = AvroCodec("overload")
        events = [codec.decode(m.value() or b"") for m in read_to_end(settings, wiring.overloads)]
        assert [(e["status"], e["since_ms"], e["cycle_start_ms"]) for e in events] == [
            ("firing", start_ms + 180_000, start_ms + 180_000),
            ("resolved", start_ms + 180_000, start_ms + 360_000),
        ]
        points = InfluxClient(settings).rows(
            wiring.database, f'SELECT "why" FROM {source("overload")} GROUP BY "status"'
        )
        assert len(points) == 2, points
        # the Operation statistics dashboard marks both on its time line (its annotation query)
        (annotation,) = [
            r
            for r in check_dashboards(
                DashboardSettings.of(settings),
                start_ms,
                start_ms + 3_600_000,
                {"thing": THING},
                database=wiring.database,
                dashboards=[d for d in load_dashboards() if d.title == "Operation statistics"],
            )
            if r.kind == "annotation"
        ]
        assert annotation.ok and (annotation.series, annotation.points) == (1, 2), annotation
    finally:
        pipeline.stop()
        InfluxClient(settings).drop_database(wiring.database)
