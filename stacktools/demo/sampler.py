"""Watching the pipeline while it runs: each stage's counters and the connector's latency
histograms, sampled once a second from the services' own /metrics, kept as time series (for the
throughput and latency plots and the rates in the summary) and printed as periodic status lines
(the demo's progress)."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from stacktools.demo.histograms import histograms_by_label
from stacktools.harness.pipeline import Pipeline
from stacktools.harness.scrape import metric_sum
from stacktools.harness.services import SERVICES, spark_stages

log = logging.getLogger("demo")

#: (service, metric name prefix, label filter) of what a stage has done so far, from its /metrics
Counter = tuple[str, str, str]


def stage_counters(stages: tuple[str, ...]) -> dict[str, Counter]:
    """What each stage of the pipeline has done so far, by name ('join input', ...)."""
    spark = {
        f"{SERVICES[name].title.removeprefix('Spark ')} input": (name, "spark_input_rows_total", "")
        for name in spark_stages(stages)
    }
    return {
        "simulator rows": ("simulator", "simulator_rows_published_total", ""),
        "bridge records": ("mqtt_bridge", "bridge_records_total", ""),
        **spark,
        "points written": ("db_connector", "connector_points_written_total", ""),
    }


#: The connector's histograms kept at every sample, per measurement: event time -> InfluxDB and
#: Kafka write -> InfluxDB (which one means something depends on the replay:
#: stacktools.demo.latency).
LATENCY_HISTOGRAMS = ("connector_event_latency_seconds", "connector_ingest_latency_seconds")


@dataclass
class HistogramSamples:
    """One histogram over the run: its bucket bounds once, its cumulative counts at each sample
    (zeros before its first observation), so an hour of samples stays a few MB."""

    bounds: tuple[float, ...]
    counts: list[tuple[float, ...]] = field(default_factory=list)


@dataclass
class Samples:
    times: list[float] = field(default_factory=list)
    counters: dict[str, list[float]] = field(default_factory=dict)
    #: (histogram, measurement) -> its samples, aligned with ``times``
    histograms: dict[tuple[str, str], HistogramSamples] = field(default_factory=dict)

    def add_histograms(self, values: dict[str, float]) -> None:
        """Keep this sample's latency histograms (after its time was appended); one missing from
        the scrape has not changed."""
        for name in LATENCY_HISTOGRAMS:
            for measurement, buckets in histograms_by_label(values, name, "measurement").items():
                kept = self.histograms.setdefault(
                    (name, measurement), HistogramSamples(tuple(b for b, _ in buckets))
                )
                if len(kept.counts) < len(self.times) - 1:
                    kept.counts += [(0.0,) * len(buckets)] * (
                        len(self.times) - 1 - len(kept.counts)
                    )
                kept.counts.append(tuple(count for _, count in buckets))
        for kept in self.histograms.values():
            if len(kept.counts) < len(self.times):
                kept.counts.append(kept.counts[-1])

    def latest(self, name: str) -> float:
        series = self.counters[name]
        return series[-1] if series else 0.0

    def peak_rate(self, name: str, window_s: float = 5.0) -> float:
        """Highest rate over any stretch of at least `window_s` (the whole run if shorter):
        what the stage sustained at its best, without one-sample spikes."""
        series, times = self.counters[name], self.times
        if len(times) < 2:
            return 0.0
        if times[-1] - times[0] <= window_s:
            return (series[-1] - series[0]) / (times[-1] - times[0])
        best, start = 0.0, 0
        for end in range(len(times)):
            while start + 1 <= end and times[end] - times[start + 1] >= window_s:
                start += 1
            if times[end] - times[start] >= window_s:
                best = max(best, (series[end] - series[start]) / (times[end] - times[start]))
        return best


class Sampler(threading.Thread):
    def __init__(
        self, pipeline: Pipeline, every_s: float = 1.0, status_every_s: float = 5.0
    ) -> None:
        super().__init__(daemon=True, name="demo-sampler")
        self.pipeline, self.every_s, self.status_every_s = pipeline, every_s, status_every_s
        self.counters = stage_counters(pipeline.stages)
        self.samples = Samples(counters={name: [] for name in self.counters})
        self.metrics: dict[str, dict[str, float]] = {}
        self._stopping = threading.Event()
        self._last: dict[str, float] = {}  # a restarted service starts its counters at 0 again
        self._t0 = 0.0

    def start(self, started: float | None = None) -> None:
        """Sample every ``every_s`` from now on; times count from ``started`` (monotonic)."""
        self._t0 = time.monotonic() if started is None else started
        super().start()

    def run(self) -> None:
        started = self._t0
        next_status = started + self.status_every_s
        while not self._stopping.wait(self.every_s):
            self.sample(time.monotonic() - started)
            if time.monotonic() >= next_status:
                next_status += self.status_every_s
                self.print_status()

    def sample(self, at_s: float) -> None:
        for service in {service for service, _, _ in self.counters.values()}:
            values = self.pipeline.metrics(service)
            if values:
                self.metrics[service] = values
        self.samples.times.append(at_s)
        for name, (service, metric, contains) in self.counters.items():
            value = metric_sum(self.metrics.get(service, {}), metric, contains)
            self._last[name] = max(self._last.get(name, 0.0), value)
            self.samples.counters[name].append(self._last[name])
        self.samples.add_histograms(self.metrics.get("db_connector", {}))

    def print_status(self) -> None:
        s = self.samples
        parts = [f"{name} {s.latest(name):,.0f}" for name in self.counters]
        print(f"[{s.times[-1]:6.0f}s] " + " | ".join(parts), flush=True)

    def stop(self) -> None:
        self._stopping.set()
        self.join(5)
