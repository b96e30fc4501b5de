"""What the dashboards' checker reads: InfluxDB, where it runs the panels' InfluxQL as Grafana
does (as the read-only user), and Prometheus, where it runs their PromQL. Nothing of the
launcher's or the services' settings, so ``python -m stacktools.dashboards --help`` lists only
these."""

from __future__ import annotations

import dataclasses

from streamkit.config import InfluxSettings, PrometheusSettings, ServiceSettings
from streamkit.fields import login_as


@dataclasses.dataclass(frozen=True)
class DashboardSettings(InfluxSettings, PrometheusSettings):
    influx_username: str = login_as("influx", "grafana")

    @classmethod
    def of(cls, settings: ServiceSettings) -> DashboardSettings:
        """These fields of wider settings (the tests' and the demo's), logged in as they are."""
        return cls(**{f.name: getattr(settings, f.name) for f in dataclasses.fields(cls)})
