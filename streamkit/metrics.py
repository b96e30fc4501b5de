"""Prometheus /metrics for every service, bound to loopback like every other server here."""
from __future__ import annotations

import logging

from prometheus_client import start_http_server

from streamkit.config import Settings

log = logging.getLogger(__name__)

#: Default /metrics port of each service; the local Prometheus scrapes exactly these.
DEFAULT_METRICS_PORTS: dict[str, int] = {
    "simulator": 9201,
    "mqtt_bridge": 9202,
    "spark_join": 9203,
    "spark_aggregate": 9204,
    "db_connector": 9205,
}


def serve_metrics(service: str, settings: Settings) -> int:
    """Start the /metrics endpoint; port 0 means the service's default. Returns the port."""
    port = settings.metrics_port or DEFAULT_METRICS_PORTS[service]
    start_http_server(port, addr=settings.metrics_host)
    log.info("metrics endpoint up", extra={"service": service, "port": port})
    return port
