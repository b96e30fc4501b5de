"""Prometheus /metrics and /healthz for every service, bound to loopback like every other
server here."""
from __future__ import annotations

import logging
import threading
from http.server import ThreadingHTTPServer

from prometheus_client import REGISTRY
from prometheus_client.exposition import MetricsHandler

from streamkit.config import Settings
from streamkit.health import WATCHDOG

log = logging.getLogger(__name__)

#: Default /metrics port of each service; the local Prometheus scrapes exactly these.
DEFAULT_METRICS_PORTS: dict[str, int] = {
    "simulator": 9201,
    "mqtt_bridge": 9202,
    "spark_join": 9203,
    "spark_aggregate": 9204,
    "db_connector": 9205,
}


class _Handler(MetricsHandler):
    """prometheus_client's handler, plus /healthz from the process's watchdog."""

    registry = REGISTRY

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path.split("?")[0] != "/healthz":
            super().do_GET()
            return
        status, body = WATCHDOG.health()
        payload = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def serve_metrics(service: str, settings: Settings) -> int:
    """Start /metrics and /healthz; port 0 means the service's default. Returns the port."""
    WATCHDOG.configure(service, settings.health_stall_s)
    port = settings.metrics_port or DEFAULT_METRICS_PORTS[service]
    server = ThreadingHTTPServer((settings.metrics_host, port), _Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    log.info("metrics endpoint up", extra={"service": service, "port": port})
    return port
