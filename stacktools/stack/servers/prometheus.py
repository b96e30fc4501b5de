"""The launcher's Prometheus: its scrape jobs, alert rules and Alertmanager."""

from __future__ import annotations

import json

from stacktools.resources import ALERT_RULES
from stacktools.stack.servers.base import Component, http_get
from streamkit.paths import find_program

#: The alert rules, the same file for the local stack and compose (unit tests beside it).


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
        jobs = [
            {
                "job_name": "prometheus",
                "static_configs": [{"targets": [f"127.0.0.1:{self.settings.prometheus_port}"]}],
            }
        ]
        # The pipeline's services are file targets, written by whoever starts them
        # (stacktools.harness.pipeline: the demo, tests, benchmarks) and removed on a clean stop,
        # each with its service and job labels: a pipeline that is not running is no target at all,
        # so it never counts as down.
        jobs.append(
            {
                "job_name": "services",
                "file_sd_configs": [
                    {"files": [str(self.conf_dir / "targets" / "*.json")], "refresh_interval": "5s"}
                ],
            }
        )
        jobs.append(
            {
                "job_name": "alertmanager",
                "static_configs": [{"targets": [f"127.0.0.1:{self.settings.alertmanager_port}"]}],
            }
        )
        config = {
            "global": {"scrape_interval": "5s", "evaluation_interval": "5s"},
            "rule_files": [str(ALERT_RULES)],
            "alerting": {
                "alertmanagers": [
                    {
                        "static_configs": [
                            {"targets": [f"127.0.0.1:{self.settings.alertmanager_port}"]}
                        ]
                    }
                ]
            },
            "scrape_configs": jobs,
        }
        # JSON is valid YAML, and needs no YAML writer here
        (self.conf_dir / "prometheus.yml").write_text(json.dumps(config, indent=2))

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
