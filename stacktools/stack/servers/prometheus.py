"""The launcher's Prometheus: its scrape jobs, alert rules and Alertmanager."""

from __future__ import annotations

import json

from stacktools.resources import ALERT_RULES
from stacktools.stack.servers.base import Component, http_get
from stacktools.stack.servers.site import ConfigFiles, Site
from streamkit.paths import find_program

#: Prometheus's and Alertmanager's ports inside their compose containers (the images' own).
PROMETHEUS_PORT = 9090
ALERTMANAGER_PORT = 9093
#: Seconds between two scrapes, two evaluations of the rules, two looks at the file targets.
INTERVAL_S = 5
#: The compose services Prometheus scrapes: the ``service`` and ``job`` labels the local stack's
#: file targets carry (dashboards and alerts work against either stack), and the container's
#: address (each service's METRICS_PORT in docker-compose.yml).
COMPOSE_TARGETS = {
    "simulator": "simulator:9201",
    "mqtt_bridge": "mqtt-bridge:9202",
    "db_connector": "db-connector:9205",
    "spark_single_pass": "spark-single-pass:9206",
    "alert_forwarder": "alert-forwarder:9207",
    "disk_space": "disk-space:9207",
}


class Prometheus(Component):
    """Prometheus (Debian) scraping itself, Alertmanager and the targets dropped as JSON files
    into ``<run dir>/prometheus/targets/`` (the pipeline's services while they run, the disk
    reporter); it evaluates :data:`ALERT_RULES` and sends the alerts to the local Alertmanager."""

    name = "prometheus"

    @property
    def ports(self) -> list[int]:
        return [self.settings.prometheus_port]

    def missing_install(self) -> str | None:
        return (
            None
            if find_program("prometheus")
            else "prometheus not found: run scripts/setup.sh (Debian package)"
        )

    def prepare(self) -> None:
        super().prepare()
        (self.conf_dir / "targets").mkdir(exist_ok=True)
        self.write_config()

    def config_files(self, site: Site) -> ConfigFiles:
        """``prometheus.yml`` and the alert rules beside it. The pipeline's services are file
        targets (``targets/*.json``): on this host written by whoever starts them
        (stacktools.harness.pipeline: the demo, tests, benchmarks) and removed on a clean stop,
        so a pipeline that is not running is no target at all and never counts as down; in
        compose written here, one for each service of :data:`COMPOSE_TARGETS`."""
        s = self.settings
        if site.in_compose:
            itself = f"localhost:{PROMETHEUS_PORT}"
            alertmanager = f"alertmanager:{ALERTMANAGER_PORT}"
        else:
            itself = f"127.0.0.1:{s.prometheus_port}"
            alertmanager = f"127.0.0.1:{s.alertmanager_port}"
        targets = str(site.conf_dir / "targets" / "*.json")
        config = {
            "global": {
                "scrape_interval": f"{INTERVAL_S}s",
                "evaluation_interval": f"{INTERVAL_S}s",
            },
            "rule_files": [str(site.conf_dir / "alerts.yml")],
            "alerting": {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]},
            "scrape_configs": [
                {"job_name": "prometheus", "static_configs": [{"targets": [itself]}]},
                {
                    "job_name": "services",
                    "file_sd_configs": [{"files": [targets], "refresh_interval": f"{INTERVAL_S}s"}],
                },
                {"job_name": "alertmanager", "static_configs": [{"targets": [alertmanager]}]},
            ],
        }
        # JSON is valid YAML, and needs no YAML writer here
        files = {
            "prometheus.yml": json.dumps(config, indent=2).encode(),
            "alerts.yml": ALERT_RULES.read_bytes(),
        }
        if site.in_compose:
            files["targets/compose.json"] = json.dumps(
                [
                    {"targets": [address], "labels": {"service": service, "job": service}}
                    for service, address in COMPOSE_TARGETS.items()
                ],
                indent=2,
            ).encode()
        return files

    def command(self) -> list[str]:
        return [
            str(find_program("prometheus")),
            f"--config.file={self.conf_dir / 'prometheus.yml'}",
            f"--storage.tsdb.path={self.data_dir}",
            f"--web.listen-address=127.0.0.1:{self.settings.prometheus_port}",
            # no --web.enable-lifecycle: anyone who reaches the port could stop it (POST /-/quit)
            # or reload it; a new configuration takes effect by a restart through the launcher
            "--storage.tsdb.retention.time=7d",
        ]

    def healthy(self) -> bool:
        return http_get(f"http://127.0.0.1:{self.settings.prometheus_port}/-/ready")[0] == 200
