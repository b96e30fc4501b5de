"""The real servers, started as local processes by the stack launcher."""

from __future__ import annotations

import json

import pytest
from prometheus_client import CollectorRegistry, Counter, start_http_server

from stacktools.stack.settings import Settings
from streamkit.deadline import TimedOut, wait_until
from tests.support import server_checks as checks

pytestmark = pytest.mark.stack


def test_transactions_aborted_invisible_committed_visible(stack_settings: Settings) -> None:
    checks.check_transactions(stack_settings)


def test_idempotent_produce_and_consume(stack_settings: Settings) -> None:
    checks.check_plain_produce_consume(stack_settings)


def test_mqtt_credentials_work_and_anonymous_is_refused(stack_settings: Settings) -> None:
    checks.check_mqtt_auth(stack_settings)


def test_influxdb_client_write_read_back_with_influxql(stack_settings: Settings) -> None:
    checks.check_influx_write_read(stack_settings)


def test_prometheus_scrapes_the_file_targets_with_their_job(
    stack_settings: Settings, free_port: int
) -> None:
    """No service port is scraped unless a file target names it (the pipeline writes one per
    running stage): a live /metrics endpoint dropped in as a file target is scraped, reported
    up, under the job its labels give."""
    jobs = {t["labels"]["job"] for t in checks.prometheus_targets(stack_settings)}
    assert {"prometheus", "alertmanager"} <= jobs
    registry = CollectorRegistry()
    Counter("stack_test_ticks", "a counter only this test exports", registry=registry).inc(3)
    server, thread = start_http_server(free_port, addr="127.0.0.1", registry=registry)
    targets_file = stack_settings.run_dir / "prometheus" / "targets" / "pytest.json"
    targets_file.write_text(
        json.dumps(
            [
                {
                    "targets": [f"127.0.0.1:{free_port}"],
                    "labels": {"service": "pytest", "job": "pytest"},
                }
            ]
        )
    )
    try:
        health = None

        def scraped() -> bool:
            nonlocal health
            mine = [
                t
                for t in checks.prometheus_targets(stack_settings)
                if t["labels"].get("service") == "pytest"
            ]
            health = mine[0]["health"] if mine else None
            return health == "up" and mine[0]["labels"]["job"] == "pytest"

        try:
            wait_until(scraped, 40, "the extra target scraped", interval_s=1)
        except TimedOut:
            raise TimedOut(f"extra target not scraped: {health}") from None
    finally:
        targets_file.unlink(missing_ok=True)
        server.shutdown()
