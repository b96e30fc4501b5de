"""The demo's arithmetic: histogram percentiles (between two scrapes and over the run), peak rates,
metric sums, and which latency the demo plots."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from stacktools.demo.histograms import histogram_between, histogram_buckets, increases, percentile
from stacktools.demo.latency import latency_view
from stacktools.demo.sampler import Samples
from stacktools.harness.scrape import metric_sum

METRICS = {
    'connector_event_latency_seconds_bucket{le="0.5",measurement="raw"}': 10.0,
    'connector_event_latency_seconds_bucket{le="1.0",measurement="raw"}': 90.0,
    'connector_event_latency_seconds_bucket{le="2.0",measurement="raw"}': 100.0,
    'connector_event_latency_seconds_bucket{le="+Inf",measurement="raw"}': 100.0,
    'connector_event_latency_seconds_bucket{le="0.5",measurement="joined"}': 5.0,
    'connector_event_latency_seconds_bucket{le="+Inf",measurement="joined"}': 5.0,
    'connector_event_latency_seconds_count{measurement="raw"}': 100.0,
    "bridge_records_total": 7.0,
    'spark_input_rows_total{query="a"}': 3.0,
    'spark_input_rows_total{query="b"}': 4.0,
}


def test_histogram_buckets_are_cumulative_per_bound_and_filtered_by_label() -> None:
    assert histogram_buckets(METRICS, "connector_event_latency_seconds", 'measurement="raw"') == [
        (0.5, 10.0),
        (1.0, 90.0),
        (2.0, 100.0),
        (math.inf, 100.0),
    ]
    assert histogram_buckets(METRICS, "connector_event_latency_seconds")[0] == (0.5, 15.0)


def test_percentiles_interpolate_inside_the_bucket_like_histogram_quantile() -> None:
    buckets = histogram_buckets(METRICS, "connector_event_latency_seconds", 'measurement="raw"')
    assert percentile(buckets, 0.5) == pytest.approx(0.5 + 0.5 * (50 - 10) / 80)
    assert percentile(buckets, 0.99) == pytest.approx(1.0 + 1.0 * (99 - 90) / 10)
    assert percentile([(0.5, 1.0), (math.inf, 2.0)], 0.99) == math.inf
    assert percentile([], 0.5) is None and percentile([(1.0, 0.0)], 0.5) is None


def test_metric_sum_adds_label_sets_and_matches_whole_names_only() -> None:
    assert metric_sum(METRICS, "spark_input_rows_total") == 7.0
    assert metric_sum(METRICS, "spark_input_rows_total", 'query="b"') == 4.0
    assert metric_sum(METRICS, "bridge_records") == 0.0


def test_peak_rate_is_the_best_sustained_window() -> None:
    samples = Samples(
        times=[0, 1, 2, 3, 4, 5, 6, 7], counters={"x": [0, 10, 20, 30, 130, 230, 240, 250]}
    )
    assert samples.peak_rate("x", window_s=2.0) == pytest.approx(100.0)
    assert samples.peak_rate("x", window_s=10.0) == pytest.approx(250 / 7)


def test_a_window_holds_only_what_was_observed_between_the_two_scrapes() -> None:
    """Warm-up (here: ten slow observations) does not count in the steady-state percentiles."""
    name = "connector_event_latency_seconds"
    before = {
        f'{name}_bucket{{le="0.5",measurement="raw"}}': 0.0,
        f'{name}_bucket{{le="8.0",measurement="raw"}}': 10.0,
        f'{name}_bucket{{le="+Inf",measurement="raw"}}': 10.0,
    }
    after = {
        f'{name}_bucket{{le="0.5",measurement="raw"}}': 100.0,
        f'{name}_bucket{{le="8.0",measurement="raw"}}': 110.0,
        f'{name}_bucket{{le="+Inf",measurement="raw"}}': 110.0,
    }
    window = histogram_between(before, after, name, 'measurement="raw"')
    assert window == [(0.5, 100.0), (8.0, 100.0), (math.inf, 100.0)]
    steady, overall = percentile(window, 0.99), percentile(histogram_buckets(after, name), 0.99)
    assert steady is not None and overall is not None
    assert steady <= 0.5 < overall


# ----------------------------------------------------------------------------- latency over the run
BOUNDS = (0.25, 0.5, 1, 2, 5, 10, 30)


class Connector:
    """The connector's two latency histograms in a registry of their own (a restart: a new
    one), scraped as text like /metrics."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.event = Histogram(
            "connector_event_latency_seconds",
            "h",
            ["measurement"],
            buckets=BOUNDS,
            registry=self.registry,
        )
        self.ingest = Histogram(
            "connector_ingest_latency_seconds",
            "h",
            ["measurement"],
            buckets=BOUNDS,
            registry=self.registry,
        )

    def scrape(self) -> dict[str, float]:
        lines = generate_latest(self.registry).decode().splitlines()
        return {
            key: float(value)
            for key, _, value in (line.rpartition(" ") for line in lines if line[:1] != "#")
        }


def oracle(
    observed: list[tuple[float, str, float]], measurement: str, since: float, until: float, q: float
) -> float | None:
    """The quantile of the observations in (since, until], bucketed from the list itself."""
    values = [latency for at, m, latency in observed if m == measurement and since < at <= until]
    buckets = [(bound, float(sum(v <= bound for v in values))) for bound in (*BOUNDS, math.inf)]
    return percentile(buckets, q)


def test_latency_over_the_run_is_what_was_observed_in_each_window() -> None:
    """Raw points all along, aggregates from t=10 s only (their first window closes), and the
    connector restarted at t=20.5 s (its histograms start from zero again): at every sample the
    p50 and p99 are those of the observations in the window before it."""
    rng = random.Random(7)
    observed = [
        (t + 0.1 * k, "raw", rng.choice([0.3, 0.4, 0.6, 0.9, 1.5]))
        for t in range(30)
        for k in range(1, 8)
    ]
    observed += [(t + 0.5, "aggregate", rng.uniform(10.5, 25)) for t in range(10, 30)]
    observed.sort()
    samples, connector, pending = Samples(), Connector(), list(observed)
    for second in range(31):
        if second == 21:
            # restarted at 20.5 s; nothing was observed since the scrape at 20 s
            connector = Connector()
        while pending and pending[0][0] <= second:
            _, measurement, latency = pending.pop(0)
            connector.event.labels(measurement).observe(latency)
            connector.ingest.labels(measurement).observe(latency / 10)
        samples.times.append(float(second))
        samples.add_histograms(connector.scrape())
    view = latency_view(samples, live=True, window_s=3.0)
    assert list(view.series) == ["raw", "aggregate"] and view.top_bound_s == 30
    for measurement, quantiles in view.series.items():
        for q in (0.5, 0.99):
            expected = [oracle(observed, measurement, t - 3.0, t, q) for t in samples.times]
            assert quantiles[q] == pytest.approx(expected), (measurement, q)
    assert view.series["aggregate"][0.5][:11] == [None] * 11
    assert all(value is not None for value in view.series["raw"][0.99][1:])


def test_a_file_replay_plots_the_ingest_latency_and_says_why() -> None:
    samples, connector = Samples(), Connector()
    for second, latency in enumerate((0.2, 0.7, 3.0)):
        connector.event.labels("raw").observe(1e6)  # the file's event times: days old
        connector.ingest.labels("raw").observe(latency)
        samples.times.append(float(second))
        samples.add_histograms(connector.scrape())
    replayed = latency_view(samples, live=False, window_s=1.0)
    assert replayed.title.startswith("Ingest latency") and "file replay" in replayed.title
    assert replayed.series["raw"][0.5] == pytest.approx([None, 0.5 + 0.5 * 0.5, 2 + 3 * 0.5])
    live = latency_view(samples, live=True, window_s=1.0)
    assert live.title.startswith("End-to-end latency") and live.series["raw"][0.5][1:] == [
        math.inf,
        math.inf,
    ]


def test_increases_read_a_drop_as_a_restart() -> None:
    assert increases([(1, 2), (1, 5), (0, 1), (2, 4)]) == [(0, 0), (0, 3), (0, 1), (2, 3)]


def test_a_histogram_seen_late_is_zero_before_and_unchanged_when_missing() -> None:
    samples = Samples(times=[0.0])
    samples.add_histograms({})
    samples.times.append(1.0)
    samples.add_histograms(
        {
            'connector_event_latency_seconds_bucket{le="1.0",measurement="joined"}': 2.0,
            'connector_event_latency_seconds_bucket{le="+Inf",measurement="joined"}': 3.0,
        }
    )
    samples.times.append(2.0)
    samples.add_histograms({})
    kept = samples.histograms[("connector_event_latency_seconds", "joined")]
    assert kept.bounds == (1.0, math.inf) and kept.counts == [(0.0, 0.0), (2.0, 3.0), (2.0, 3.0)]


def test_the_latency_png_is_written_only_with_observations(tmp_path: Path) -> None:
    from stacktools.demo import plots

    samples, connector = Samples(), Connector()
    assert plots.latency(samples, True, tmp_path / "none.png") is None
    for second in range(10):
        connector.event.labels("raw").observe(0.4)
        # beyond 30 s: drawn at 30 s
        connector.event.labels("aggregate").observe(100.0 if second == 5 else 12.0)
        samples.times.append(float(second))
        samples.add_histograms(connector.scrape())
    written = plots.latency(samples, True, tmp_path / "latency.png")
    assert written == tmp_path / "latency.png" and written.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
