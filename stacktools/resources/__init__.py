"""The files the tools read beside their code: Prometheus's alert rules, the Grafana dashboards
and their datasources, the example machine catalogue.

In a checkout these are links to the repository's own files (``prometheus/``, ``grafana/``,
``examples/``, which docker compose mounts too); a package built from it carries copies, so the
installed tools find them without a checkout.
"""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).parent

ALERT_RULES = _HERE / "alerts.yml"
DASHBOARD_DIR = _HERE / "dashboards"
DATASOURCES_FILE = _HERE / "datasources.yaml"
EXAMPLE_CATALOGUE = _HERE / "machine-catalogue.yaml"
