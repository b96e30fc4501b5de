"""Prometheus histograms as scraped from /metrics: their buckets, what was observed between two
scrapes or over a run's consecutive samples, and percentiles like PromQL's histogram_quantile.
The demo's summary and plots and the end-to-end benchmark all read latency this way."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

_BUCKET = re.compile(r"^(?P<name>\w+)_bucket\{(?P<labels>[^}]*)\}$")
_LE = re.compile(r'le="([^"]+)"')

Buckets = list[tuple[float, float]]  #: (upper bound, cumulative count), ascending, +Inf last


def _bound(labels: str) -> float | None:
    found = _LE.search(labels)
    if not found:
        return None
    return math.inf if found.group(1) == "+Inf" else float(found.group(1))


def histogram_buckets(values: dict[str, float], name: str, contains: str = "") -> Buckets:
    """(upper bound, cumulative count) of a Prometheus histogram, summed over its label sets."""
    buckets: dict[float, float] = {}
    for key, value in values.items():
        match = _BUCKET.match(key)
        if match and match["name"] == name and contains in match["labels"]:
            upper = _bound(match["labels"])
            if upper is not None:
                buckets[upper] = buckets.get(upper, 0.0) + value
    return sorted(buckets.items())


def histograms_by_label(values: dict[str, float], name: str, label: str) -> dict[str, Buckets]:
    """The histogram per value of one label (e.g. per measurement), summed over the others."""
    value_of = re.compile(rf'(?:^|,){re.escape(label)}="([^"]*)"')
    per_value: dict[str, dict[float, float]] = {}
    for key, value in values.items():
        match = _BUCKET.match(key)
        if not match or match["name"] != name:
            continue
        labelled, upper = value_of.search(match["labels"]), _bound(match["labels"])
        if labelled and upper is not None:
            buckets = per_value.setdefault(labelled.group(1), {})
            buckets[upper] = buckets.get(upper, 0.0) + value
    return {label_value: sorted(buckets.items()) for label_value, buckets in per_value.items()}


def histogram_between(
    before: dict[str, float], after: dict[str, float], name: str, contains: str = ""
) -> Buckets:
    """The histogram of what was observed between two scrapes of a process: percentiles over a
    window (steady state after a warm-up) instead of since the start."""
    earlier = dict(histogram_buckets(before, name, contains))
    return [
        (upper, count - earlier.get(upper, 0.0))
        for upper, count in histogram_buckets(after, name, contains)
    ]


def percentile(buckets: Buckets, q: float) -> float | None:
    """Linear interpolation inside the bucket that holds the q-th observation, like PromQL's
    histogram_quantile; None without observations, inf when it lies beyond the last bound."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    lower, below = 0.0, 0.0
    for upper, cumulative in buckets:
        if cumulative >= rank:
            if math.isinf(upper):
                return math.inf
            return lower + (upper - lower) * (
                (rank - below) / (cumulative - below) if cumulative > below else 1.0
            )
        lower, below = upper, cumulative
    return math.inf


def increases(counts: Sequence[Sequence[float]]) -> list[tuple[float, ...]]:
    """What each sample added to the cumulative bucket counts since the one before (the first:
    nothing). A total that went down means the process restarted from zero, so everything it
    holds now is new, as PromQL's increase() reads a counter reset."""
    if not counts:
        return []
    added = [tuple(0.0 for _ in counts[0])]
    for previous, current in zip(counts, counts[1:], strict=False):
        restarted = current[-1] < previous[-1]
        added.append(
            tuple(current)
            if restarted
            else tuple(now - before for now, before in zip(current, previous, strict=True))
        )
    return added


def quantiles_over_time(
    times: Sequence[float],
    bounds: Sequence[float],
    counts: Sequence[Sequence[float]],
    quantiles: Sequence[float],
    window_s: float,
) -> dict[float, list[float | None]]:
    """Each quantile at each sample, over what was observed in the ``window_s`` before it (the
    sum of the consecutive increases in that window, like a rate over a range in PromQL); None
    where nothing was observed."""
    added = increases(counts)
    series: dict[float, list[float | None]] = {q: [] for q in quantiles}
    start = 0
    for index, now in enumerate(times):
        while times[start] <= now - window_s:
            start += 1
        observed = [sum(column) for column in zip(*added[start : index + 1], strict=True)]
        buckets = list(zip(bounds, observed, strict=True))
        for q in quantiles:
            series[q].append(percentile(buckets, q))
    return series
