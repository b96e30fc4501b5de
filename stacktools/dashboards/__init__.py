"""The views of the running pipeline: Grafana's dashboards, checked here, and the pipeline graph
(:mod:`.graph`), both reading the stack's Prometheus through :mod:`.prometheus_api`.

Grafana dashboards: a structural check and a dry run of every query against the real stack.

There is no Grafana here to load the provisioned JSON (grafana/dashboards/), so a broken
dashboard would only show up as an empty or red panel after deployment. This package closes
that gap in two steps:

1. ``validate_dashboards`` (:mod:`.validate`) checks what Grafana 11.6 needs to provision and
   render a dashboard and returns readable problems instead of raising.
2. ``check_dashboards`` (:mod:`.check`) does what Grafana's frontend does before a query leaves
   the browser (resolve template variables by running their queries, compute ``$__interval``,
   fill the macros, expand repeated panels; :mod:`.macros`, :mod:`.variables`, :mod:`.model`)
   and sends every query to the local InfluxDB and Prometheus (:mod:`.queries`), reporting
   series and points per panel target.

Only the stdlib and PyYAML are used, so the check runs wherever the stack runs. The CLI
(``python -m stacktools.dashboards validate|list|check``) is in :mod:`.cli`.
"""

from stacktools.dashboards.check import PanelResult, check_dashboards
from stacktools.dashboards.cli import main
from stacktools.dashboards.model import (
    Dashboard,
    Datasource,
    Selection,
    TimeRange,
    expand_panels,
    iter_panels,
    load_dashboards,
    load_datasources,
)
from stacktools.dashboards.queries import QueryError
from stacktools.dashboards.validate import (
    SCHEMA_VERSION,
    validate_dashboard,
    validate_dashboards,
)

__all__ = [
    "SCHEMA_VERSION",
    "Dashboard",
    "Datasource",
    "PanelResult",
    "QueryError",
    "Selection",
    "TimeRange",
    "check_dashboards",
    "expand_panels",
    "iter_panels",
    "load_dashboards",
    "load_datasources",
    "main",
    "validate_dashboard",
    "validate_dashboards",
]
