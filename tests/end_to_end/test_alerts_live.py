"""The alerts on the real stack: a stage stopped mid-replay raises its alert, which reaches a
webhook through the launcher's Prometheus and Alertmanager within the bound docs/operations.md
states; started again, the webhook hears it resolved.

The rules are the shipped ones (prometheus/alerts.yml, ``for: 1m``) and the Alertmanager
timing the launcher's own: nothing is shortened for the test.
"""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from stacktools.harness.pipeline import Pipeline
from stacktools.harness.scrape import scrape_metrics
from stacktools.harness.wiring import Wiring
from stacktools.stack.influx import InfluxClient
from stacktools.stack.settings import Settings
from streamkit.deadline import Deadline
from tests.end_to_end.test_pipeline_to_influx import recent_events
from tests.support.waits import settle
from tests.support.webhook import Webhook

pytestmark = [pytest.mark.stack, pytest.mark.spark]

#: docs/operations.md: a stopped stage reaches the webhook as ServiceDown within about 80 s
#: (scrape 5 s, `for:` 60 s, evaluation 5 s, group_wait 10 s), resolved within about 40 s of
#: answering again (scrape, evaluation, group_interval 30 s); the slack is for a busy machine.
FIRE_BOUND_S = 100.0
RESOLVE_BOUND_S = 60.0
STAGE = "db_connector"


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def prometheus_query(settings: Settings, expr: str) -> list[dict[str, Any]]:
    query = urllib.parse.urlencode({"query": expr})
    return get_json(f"http://127.0.0.1:{settings.prometheus_port}/api/v1/query?{query}")["data"][
        "result"
    ]


def prometheus_alerts(settings: Settings, instance: str) -> list[dict[str, Any]]:
    alerts = get_json(f"http://127.0.0.1:{settings.prometheus_port}/api/v1/alerts")["data"]
    return [a for a in alerts["alerts"] if a["labels"].get("instance") == instance]


def alertmanager_alerts(settings: Settings, instance: str) -> list[dict[str, Any]]:
    alerts = get_json(f"http://127.0.0.1:{settings.alertmanager_port}/api/v2/alerts")
    return [a for a in alerts if a["labels"].get("instance") == instance]


def test_a_stage_stopped_mid_replay_alerts_the_webhook_and_resolves(
    stack_settings: Settings, webhook: Webhook, tmp_path: Path
) -> None:
    settings = stack_settings
    # what the disk alert reads is scraped from the stack's own data directories
    free_space = 'count(data_dir_free_bytes{dir=~"kafka|influxdb"} > 0) == 2'
    assert settle(
        lambda: prometheus_query(settings, free_space), 30, "Kafka's and InfluxDB's free space"
    )
    wiring = Wiring.private(settings)
    pipeline = Pipeline(
        settings,
        wiring,
        tmp_path / "run",
        extra_args={
            "spark_single_pass": ["--shuffle-partitions", "2"],
            "db_connector": ["--flush-interval", "500ms"],
        },
    )
    try:
        pipeline.start_stages()
        pipeline.wait_bridges()
        # slow enough that the replay still runs when the stage is stopped
        events = recent_events(tmp_path / "events.json", int(time.time() * 1000))
        simulator = pipeline.replay(events, "--order", "file", "--rate", "30")
        instance = f"127.0.0.1:{pipeline.ports[STAGE]}"

        def writing() -> bool:
            written = sum(
                value
                for key, value in pipeline.metrics(STAGE).items()
                if key.startswith("connector_points_written_total")
            )
            return written > 0 and bool(
                prometheus_query(settings, f'up{{instance="{instance}"}} == 1')
            )

        assert settle(writing, 240, "the connector writing, scraped up"), pipeline.log(
            STAGE
        ).read_text()[-2000:]
        assert simulator.alive(), "the replay ended before the stage was stopped"

        pipeline.kill9(STAGE)
        stopped = time.monotonic()
        fired = settle(
            lambda: webhook.seen("ServiceDown", instance, "firing"), FIRE_BOUND_S, "ServiceDown"
        )
        took = time.monotonic() - stopped
        assert fired, f"no ServiceDown for {instance} at the webhook within {FIRE_BOUND_S:.0f} s"
        print(f"ServiceDown reached the webhook {took:.0f} s after the stage was killed")
        # the same alert through both APIs
        assert any(
            a["labels"]["alertname"] == "ServiceDown" and a["state"] == "firing"
            for a in prometheus_alerts(settings, instance)
        )
        assert any(
            a["labels"]["alertname"] == "ServiceDown" and a["status"]["state"] == "active"
            for a in alertmanager_alerts(settings, instance)
        )

        pipeline.restart(STAGE)  # the same /metrics port: the same target
        answering = Deadline(60)
        while not scrape_metrics(pipeline.ports[STAGE]) and not answering.expired():
            time.sleep(0.2)
        back = time.monotonic()
        resolved = settle(
            lambda: webhook.seen("ServiceDown", instance, "resolved"),
            RESOLVE_BOUND_S,
            "ServiceDown resolved",
        )
        took = time.monotonic() - back
        assert resolved, f"ServiceDown for {instance} not resolved within {RESOLVE_BOUND_S:.0f} s"
        print(f"resolved reached the webhook {took:.0f} s after the stage answered again")
        assert not any(
            a["labels"]["alertname"] == "ServiceDown" for a in prometheus_alerts(settings, instance)
        )
    finally:
        pipeline.stop()
        InfluxClient(settings).drop_database(wiring.database)
