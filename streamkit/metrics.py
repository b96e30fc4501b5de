"""Prometheus /metrics and /healthz for every service, bound to loopback like every other
server here."""

from __future__ import annotations

import logging
import threading
from http.server import ThreadingHTTPServer

from prometheus_client import REGISTRY
from prometheus_client.exposition import MetricsHandler

from streamkit.config import ServiceSettings
from streamkit.health import WATCHDOG

log = logging.getLogger(__name__)


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


def serve_metrics(service: str, settings: ServiceSettings) -> int:
    """Start /metrics and /healthz on the settings' port (0: any free one). Returns the port."""
    WATCHDOG.configure(service, settings.health_stall)
    server = ThreadingHTTPServer((settings.metrics_host, settings.metrics_port), _Handler)
    port = server.server_address[1]
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    log.info("metrics endpoint up", extra={"service": service, "port": port})
    return port
