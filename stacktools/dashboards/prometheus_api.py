"""The stack's Prometheus HTTP API, as the tools above the services ask it: the dashboards
checker (every panel's query) and the pipeline view (each stage's rates, backlog and alerts).
Requests are POSTed, as Grafana's provisioned datasource does."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

from stacktools.dashboards.errors import PrometheusError
from streamkit.config import PrometheusSettings

HTTP_TIMEOUT_S = 30.0


def call(settings: PrometheusSettings, path: str, params: Mapping[str, Any] | None = None) -> Any:
    """POST ``params`` to the HTTP API, or GET an endpoint without any (those that take only
    GET, such as /api/v1/alerts); returns ``data``. Error answers (400, 422) carry JSON too."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{settings.prometheus_port}{path}",
        data=None if params is None else urllib.parse.urlencode(params, doseq=True).encode(),
    )
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as response:
            raw = response.read()
    except urllib.error.HTTPError as exc:
        raw = exc.read()
    except OSError as exc:
        raise PrometheusError(f"cannot reach {request.full_url}: {exc}") from None
    try:
        body = json.loads(raw or b"{}")
    except json.JSONDecodeError:
        raise PrometheusError(
            f"Prometheus answered with something that is not JSON: {raw[:300]!r}"
        ) from None
    if body.get("status") != "success":
        raise PrometheusError(f"{body.get('errorType', 'error')}: {body.get('error', body)}")
    return body.get("data")


def instant(settings: PrometheusSettings, expr: str) -> list[tuple[dict[str, str], float]]:
    """An instant vector now: (labels, value) per series; a scalar comes as one unlabelled."""
    data = call(settings, "/api/v1/query", {"query": expr})
    if data.get("resultType") == "scalar":
        return [({}, float(data["result"][1]))]
    return [
        (dict(series.get("metric") or {}), float(series["value"][1]))
        for series in data.get("result") or []
    ]
