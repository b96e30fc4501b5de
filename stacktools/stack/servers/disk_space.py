"""The launcher's disk reporter (``python -m stacktools.stack.disk_space``) for the Kafka and
InfluxDB data directories, and its Prometheus file target."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from stacktools.stack.servers.base import Component, http_get
from stacktools.stack.servers.kafka import kafka_nodes
from streamkit.paths import private_directory


class DiskSpace(Component):
    """``python -m stacktools.stack.disk_space`` for the Kafka and InfluxDB data directories of this
    run directory: their filesystems' free space on /metrics, for the disk alert; the servers'
    logs of ``run/logs`` rotated by size; and each of these servers started again by the
    launcher once its disk has room, after it filled. Its port is
    any free one, chosen at each start and handed to Prometheus as a file target."""

    name = "disk-space"

    @property
    def port_file(self) -> Path:
        return self.conf_dir / "metrics-port"

    @property
    def target_file(self) -> Path:
        return self.settings.run_dir / "prometheus" / "targets" / "disk-space.json"

    @property
    def ports(self) -> list[int]:
        return [int(self.port_file.read_text())] if self.port_file.exists() else []

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.ports[0]}" if self.ports else "-"

    def watched_names(self) -> list[str]:
        return [*(node.name for node in kafka_nodes(self.settings)), "influxdb"]

    def watched(self) -> str:
        data = self.settings.run_dir / "data"
        return ",".join(f"{name}={data / name}" for name in self.watched_names())

    def prepare(self) -> None:
        from stacktools.stack.process import free_port

        super().prepare()
        self.port_file.write_text(f"{free_port()}\n")
        private_directory(self.target_file.parent.parent)
        private_directory(self.target_file.parent)
        self.target_file.write_text(
            json.dumps(
                # the job label as compose's scrape job names it: one alert, the same labels
                [
                    {
                        "targets": [self.address],
                        "labels": {"service": "disk_space", "job": "disk_space"},
                    }
                ],
                indent=2,
            )
        )

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "stacktools.stack.disk_space",
            "--metrics-port",
            str(self.ports[0]),
            "--disk-watch",
            self.watched(),
            "--log-dir",
            str(self.settings.run_dir / "logs"),
            "--disk-resume",
            ",".join(self.watched_names()),
        ]

    def env(self) -> dict[str, str]:
        """The launcher's settings: the launches that resume a server resolve exactly these."""
        return self.settings.as_environment()

    def healthy(self) -> bool:
        return bool(self.ports) and http_get(f"http://{self.address}/healthz")[0] == 200
