"""The tools' shared errors, under the project's root (:class:`streamkit.errors.StackError`);
the launcher's own are in :mod:`stacktools.stack.errors`, the dashboard checker's in
:mod:`stacktools.dashboards.errors`."""

from __future__ import annotations

from streamkit.errors import StackError


class InfluxError(StackError, RuntimeError):
    """InfluxDB refused or failed a statement."""


class PrometheusError(StackError, RuntimeError):
    """Prometheus could not be reached or refused a query."""
