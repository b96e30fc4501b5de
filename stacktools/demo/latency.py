"""Which latency the demo reports, and its p50 and p99 per measurement over the run.

Event time -> InfluxDB means something only when rows are stamped as they are published
(--live): a file replay keeps the file's event times, days old, so it measures the file's age.
Then the demo shows the part that does not depend on them: the record's Kafka write (the
bridge's, or the Spark sink's for joined and aggregate records) -> InfluxDB.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from stacktools.demo.histograms import quantiles_over_time
from stacktools.demo.sampler import LATENCY_HISTOGRAMS, Samples

EVENT_LATENCY, INGEST_LATENCY = LATENCY_HISTOGRAMS
#: Measurements in this order first (the pipeline's), any others after them.
MEASUREMENTS = ("raw", "joined", "aggregate", "late", "dead_letter")
QUANTILES = (0.5, 0.99)
#: Each point of the plot covers the observations of this long before it (a few connector
#: batches: one sample's difference alone is often empty).
WINDOW_S = 5.0


def latency_metric(live: bool) -> str:
    return EVENT_LATENCY if live else INGEST_LATENCY


@dataclass(frozen=True)
class LatencyView:
    title: str
    #: measurement -> quantile -> value at each sample time (None: nothing observed; inf: beyond
    #: the last bucket)
    series: dict[str, dict[float, list[float | None]]]
    top_bound_s: float  #: the largest finite bucket bound: what a plot can show at most


def latency_view(samples: Samples, live: bool, window_s: float = WINDOW_S) -> LatencyView:
    """p50 and p99 per measurement at each sample, from the differences of consecutive samples
    of the connector's histogram."""
    metric = latency_metric(live)
    title = (
        "End-to-end latency: event time → InfluxDB ack (aggregates: from when the data made "
        "their window closable)"
        if live
        else "Ingest latency: Kafka write → InfluxDB ack (a file replay: its event times are the "
        "file's, so event time → InfluxDB means nothing here)"
    )
    kept = {
        measurement: histogram
        for (name, measurement), histogram in samples.histograms.items()
        if name == metric
    }
    order = sorted(
        kept, key=lambda m: (MEASUREMENTS.index(m) if m in MEASUREMENTS else len(MEASUREMENTS), m)
    )
    series = {}
    for measurement in order:
        histogram = kept[measurement]
        quantiles = quantiles_over_time(
            samples.times, histogram.bounds, histogram.counts, QUANTILES, window_s
        )
        if any(value is not None for values in quantiles.values() for value in values):
            series[measurement] = quantiles
    bounds = [b for histogram in kept.values() for b in histogram.bounds if not math.isinf(b)]
    return LatencyView(title, series, max(bounds, default=math.inf))
