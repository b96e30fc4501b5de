"""The demo's arithmetic: histogram percentiles, peak rates, metric sums."""
from __future__ import annotations

import math

import pytest

from stacktools.demo.report import histogram_between, histogram_buckets, percentile
from stacktools.demo.sampler import Samples
from stacktools.scrape import metric_sum

METRICS = {
    'connector_event_latency_seconds_bucket{le="0.5",measurement="raw"}': 10.0,
    'connector_event_latency_seconds_bucket{le="1.0",measurement="raw"}': 90.0,
    'connector_event_latency_seconds_bucket{le="2.0",measurement="raw"}': 100.0,
    'connector_event_latency_seconds_bucket{le="+Inf",measurement="raw"}': 100.0,
    'connector_event_latency_seconds_bucket{le="0.5",measurement="joined"}': 5.0,
    'connector_event_latency_seconds_bucket{le="+Inf",measurement="joined"}': 5.0,
    'connector_event_latency_seconds_count{measurement="raw"}': 100.0,
    'bridge_records_total': 7.0,
    'spark_input_rows_total{query="a"}': 3.0,
    'spark_input_rows_total{query="b"}': 4.0,
}


def test_histogram_buckets_are_cumulative_per_bound_and_filtered_by_label() -> None:
    assert histogram_buckets(METRICS, "connector_event_latency_seconds", 'measurement="raw"') == [
        (0.5, 10.0), (1.0, 90.0), (2.0, 100.0), (math.inf, 100.0)]
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
    samples = Samples(times=[0, 1, 2, 3, 4, 5, 6, 7], counters={"x": [0, 10, 20, 30, 130, 230, 240, 250]})
    assert samples.peak_rate("x", window_s=2.0) == pytest.approx(100.0)
    assert samples.peak_rate("x", window_s=10.0) == pytest.approx(250 / 7)


def test_a_window_holds_only_what_was_observed_between_the_two_scrapes() -> None:
    """Warm-up (here: ten slow observations) does not count in the steady-state percentiles."""
    name = "connector_event_latency_seconds"
    before = {f'{name}_bucket{{le="0.5",measurement="raw"}}': 0.0, f'{name}_bucket{{le="8.0",measurement="raw"}}': 10.0,
              f'{name}_bucket{{le="+Inf",measurement="raw"}}': 10.0}
    after = {f'{name}_bucket{{le="0.5",measurement="raw"}}': 100.0, f'{name}_bucket{{le="8.0",measurement="raw"}}': 110.0,
             f'{name}_bucket{{le="+Inf",measurement="raw"}}': 110.0}
    window = histogram_between(before, after, name, 'measurement="raw"')
    assert window == [(0.5, 100.0), (8.0, 100.0), (math.inf, 100.0)]
    assert percentile(window, 0.99) <= 0.5 < percentile(histogram_buckets(after, name), 0.99)
