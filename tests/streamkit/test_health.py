"""/healthz and the progress gauge on a real HTTP server: healthy while the loop beats, 503 once
it has not for longer than the limit."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from datetime import timedelta

from stacktools.stack.process import free_port
from stacktools.stack.settings import Settings
from streamkit.health import WATCHDOG, beat
from streamkit.metrics import serve_metrics


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_healthz_turns_503_when_the_loop_stops_beating_and_back_when_it_beats() -> None:
    port = serve_metrics(
        "db_connector",
        Settings.from_sources(
            cli={"metrics_port": free_port(), "health_stall": timedelta(milliseconds=300)}
        ),
    )
    status, body = _get(port, "/healthz")
    assert status == 200 and body.startswith("ok: db_connector")
    time.sleep(0.5)  # the scenario: no beat for longer than health_stall (0.3 s)
    status, body = _get(port, "/healthz")
    assert status == 503 and "no progress" in body
    before = time.time()
    beat()
    assert _get(port, "/healthz")[0] == 200
    status, metrics = _get(port, "/metrics")
    line = next(
        text
        for text in metrics.splitlines()
        if text.startswith('service_last_progress_timestamp_seconds{service="db_connector"}')
    )
    assert float(line.split()[-1]) >= before - 1
    WATCHDOG.stall = timedelta(minutes=2)  # leave the process's watchdog as other tests expect it
