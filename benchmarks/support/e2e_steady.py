"""The steady-state measurement of benchmarks/bench_e2e.py: a live replay started with the stages
(the seconds to the first joined point), the stages' metrics and CPU at both ends of the
measured window (the CPU snapshot the full replay takes too), and the data's own wait modelled
for the replayed rows."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.support.certainty import certainty_waits
from benchmarks.support.quantile import quantile
from spark_jobs.config import JoinSettings
from spark_jobs.join import join_plan
from stacktools.demo.histograms import histogram_between, percentile
from stacktools.harness.cpu import group_cpu_seconds
from stacktools.harness.pipeline import Pipeline
from stacktools.harness.scrape import metric_sum
from stacktools.harness.services import SERVICES
from streamkit.deadline import TimedOut, wait_until


@dataclass
class Steady:
    shape: str
    rate: int
    achieved_rows_per_s: float
    first_joined_s: float | None  #: stages started -> first joined point in InfluxDB
    #: every stage ready (its ready line: Spark's query running) -> the first joined point
    ready_joined_s: float | None
    latency: dict[
        str, tuple[float | None, float | None]
    ]  #: measurement -> (p50, p99) over the window
    cpu_us_per_record: dict[str, float]  #: stage or server -> CPU µs per raw record in the window
    #: the joined pairs' own wait (later input -> certain; a model of the feed): (p50, p99)
    data_wait: tuple[float | None, float | None] = (None, None)


def cpu_snapshot(pipeline: Pipeline, servers: dict[str, int]) -> dict[str, float]:
    """CPU seconds so far of every stage's process group, the simulator's and each server's (a
    Spark worker's group holds its executors and their Python workers)."""
    cpu = {
        name: group_cpu_seconds(service.process.pid)
        for name, service in pipeline.services.items()
        if service.process is not None
    }
    cpu.update({name: group_cpu_seconds(pid) for name, pid in servers.items()})
    return cpu


def start_live(
    pipeline: Pipeline, events: Path, rate: int, warmup_s: float
) -> tuple[float, float | None, float | None]:
    """Starts the stages and a looped live replay as soon as the bridge subscribed, so the start
    is measured as a user meets it: returns when it started and the seconds from the start and
    from every stage ready to the first joined point (None if none came within the warm-up)."""
    started = time.monotonic()
    pipeline.start_stages()
    ready_at: list[float] = []

    def mark_ready() -> None:
        """When every stage logged its ready line (the replay does not wait for it)."""
        try:
            pipeline.wait_ready(warmup_s)
            ready_at.append(time.monotonic())
        except (TimedOut, RuntimeError):
            pass

    threading.Thread(target=mark_ready, name="ready-watch", daemon=True).start()
    # a new session keeps nothing before
    pipeline.wait_logged("mqtt_bridge", SERVICES["mqtt_bridge"].ready_line, 60)
    # until stopped
    pipeline.replay(events, "--rate", str(rate), "--live", "--order", "file", "--loops", "0")
    joined = 'measurement="joined"'
    try:
        wait_until(
            lambda: metric_sum(
                pipeline.metrics("db_connector"), "connector_points_written_total", joined
            ),
            warmup_s,
            "the first joined point",
            interval_s=0.2,
        )
        first_at = time.monotonic()
        first: float | None = first_at - started
        ready_joined = first_at - ready_at[0] if ready_at else None
    except TimedOut:
        first = ready_joined = None
    return started, first, ready_joined


@dataclass
class Window:
    """The stages' metrics and CPU at both ends of the measured window: the steady state is
    what happened between them, so the warm-up never counts."""

    before: dict[str, dict[str, float]]
    after: dict[str, dict[str, float]]
    cpu_before: dict[str, float]
    cpu_after: dict[str, float]
    seconds: float

    def delta(self, service: str, metric: str) -> float:
        return metric_sum(self.after[service], metric) - metric_sum(self.before[service], metric)

    def latency(self) -> dict[str, tuple[float | None, float | None]]:
        """(p50, p99) per measurement of what the connector observed inside the window."""
        latency = {}
        for measurement in ("raw", "joined", "aggregate"):
            buckets = histogram_between(
                self.before["db_connector"],
                self.after["db_connector"],
                "connector_event_latency_seconds",
                f'measurement="{measurement}"',
            )
            latency[measurement] = (percentile(buckets, 0.5), percentile(buckets, 0.99))
        return latency

    def cpu_us_per_record(self) -> dict[str, float]:
        """Each stage's and server's CPU over the raw records the bridge produced meanwhile."""
        records = self.delta("mqtt_bridge", "bridge_records_total")
        if not records:
            return {}
        return {
            name: (self.cpu_after[name] - self.cpu_before.get(name, 0.0)) / records * 1e6
            for name in self.cpu_after
        }


def measure_window(pipeline: Pipeline, servers: dict[str, int], measure_s: float) -> Window:
    """Scrapes and samples both ends of ``measure_s``; a simulator that stopped inside it would
    leave a window without load, so that fails the run."""
    before = {name: pipeline.metrics(name) for name in ("simulator", *pipeline.stages)}
    cpu_before, window_started = cpu_snapshot(pipeline, servers), time.monotonic()
    time.sleep(measure_s)
    after = {name: pipeline.metrics(name) for name in ("simulator", *pipeline.stages)}
    cpu_after, window_s = cpu_snapshot(pipeline, servers), time.monotonic() - window_started
    if not pipeline.services["simulator"].alive():
        raise RuntimeError(f"the simulator stopped inside the window: {pipeline.log('simulator')}")
    return Window(before, after, cpu_before, cpu_after, window_s)


def data_wait(events: Path, rate: int, warmup_s: float) -> tuple[float | None, float | None]:
    """p50 and p99 of how long the replayed pairs wait for the data alone after the warm-up:
    from their later input (where the joined latency counts from) to the arrival of the record
    that makes them certain (docs/join.md), the rows stamped on arrival at ``rate`` as --live
    does, with the stack's join settings. A model: the part of the joined latency no pipeline
    can remove."""
    with events.open() as handle:
        rows = (json.loads(line) for line in handle)
        waits = certainty_waits(
            rows, rate, join_plan(JoinSettings.from_sources()), since_s=warmup_s
        )
    return (quantile(waits, 0.5), quantile(waits, 0.99)) if waits else (None, None)
