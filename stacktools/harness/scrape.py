"""Reading a service's Prometheus /metrics: the demo's sampler, the pipeline, the benchmarks
and the tests all read counters this way."""

from __future__ import annotations

import urllib.request


def scrape_metrics(port: int, timeout_s: float = 5) -> dict[str, float]:
    """``/metrics`` on 127.0.0.1:port as {'name{labels}': value}; empty when nothing answers."""
    try:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{port}/metrics", timeout=timeout_s
        ) as response:
            text = response.read().decode()
    except OSError:
        return {}
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            try:
                values[key] = float(value)
            except ValueError:
                continue
    return values


def metric_sum(values: dict[str, float], name: str, contains: str = "") -> float:
    """Sum of a metric over all its label sets (``name`` or ``name{...}``) whose labels
    contain ``contains``."""
    return sum(
        v for k, v in values.items() if (k == name or k.startswith(name + "{")) and contains in k
    )
