"""Progress a supervisor can see: a service whose loops have stopped turning must look
different from one that is merely idle.

Each service calls ``beat()`` where its work loop goes round (the bridge's main loop while
paho's network thread lives, the connector's consume loop, every Spark progress or idle event,
the simulator's publish loop). ``service_last_progress_timestamp_seconds{service}`` on
/metrics shows when that last happened, and ``/healthz`` on the same port answers 503 once it
is older than ``HEALTH_STALL``: a check for compose, systemd or an alert.
"""

from __future__ import annotations

import time
from datetime import timedelta

from prometheus_client import Gauge

PROGRESS = Gauge(
    "service_last_progress_timestamp_seconds",
    "when the service's work loop last went round (Unix seconds)",
    ["service"],
)


class Watchdog:
    """One per process (``WATCHDOG``): set up by ``streamkit.metrics.serve_metrics``."""

    def __init__(self) -> None:
        self.service = ""
        self.stall = timedelta(minutes=2)
        self._last = time.monotonic()
        self._gauge: Gauge | None = None

    def configure(self, service: str, stall: timedelta) -> None:
        self.service, self.stall = service, stall
        self._gauge = PROGRESS.labels(service)
        self.beat()

    def beat(self) -> None:
        self._last = time.monotonic()
        if self._gauge is not None:
            self._gauge.set(time.time())

    def health(self) -> tuple[int, str]:
        """(HTTP status, body) for /healthz."""
        age = time.monotonic() - self._last
        if age <= self.stall.total_seconds():
            return 200, f"ok: {self.service} made progress {age:.1f} s ago\n"
        return (
            503,
            f"stalled: {self.service} made no progress for {age:.0f} s "
            f"(limit {self.stall.total_seconds():.0f} s)\n",
        )


WATCHDOG = Watchdog()


def beat() -> None:
    WATCHDOG.beat()
