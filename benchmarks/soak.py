"""Soak benchmark: the whole pipeline for a long time (a script, not a test), in two modes.

    .venv/bin/python benchmarks/soak.py [--duration 2h] [--rate 200] [--interval 30s]
        [--warmup 5m] [--shape single-pass] [--out soak]
    .venv/bin/python benchmarks/soak.py --replay [--span 28d] [--speed 1000] [--out soak-replay]

Steady (the default): the stack (started if it is not running) and the stages of --shape take a
looped live replay at --rate rows a second (the simulator stamps every row with the wall clock,
so event time advances as in a plant). A leak shows as a slope an hour.

Replay (--replay): --span of generated event time (benchmarks/support/churn.py: machines joining
and leaving, firmware renaming quantities, one machine sending a new name in every row) replayed
--speed times faster than real time. The state retention is scaled by the same factor, so a
retired machine is dropped after the same event-time silence as in a plant. What should stay
flat (state, memory) shows as a slope an event day.

Every --interval it samples, for every stage and server: resident memory, open file
descriptors, threads and CPU seconds (each a process group with its descendants: a Spark driver
with its JVM and Python workers); the Spark stage's state (the driver's keys and bytes, Spark's
state rows); the raw records the bridge has taken; the size on disk of each server's data, the
stages' checkpoints and the logs; InfluxDB's series.

After the warm-up it fits a straight line to each figure and prints its slope beside the
figure's value at the end of the warm-up, so that growth stands out from level. It writes every
sample to ``<out>.csv`` and draws every figure in one picture, ``<out>.png``.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import numpy as np

from benchmarks.bench_e2e import Layout, server_pids
from benchmarks.support.churn import Churn, churn_file
from benchmarks.support.e2e_steady import start_live
from benchmarks.support.events import events_file
from spark_jobs.config import JoinSettings
from stacktools.harness.cpu import group_cpu_seconds, group_pids
from stacktools.harness.pipeline import Pipeline
from stacktools.harness.scrape import metric_sum
from stacktools.harness.services import DEFAULT_SHAPE, SHAPES
from stacktools.harness.wiring import Wiring
from stacktools.stack import Stack
from stacktools.stack.influx import InfluxClient
from stacktools.stack.settings import Settings
from streamkit.durations import format_duration, parse_duration

#: Spark's and the driver's state, from the Spark stage's /metrics.
STATE_METRICS = ("driver_state_keys", "driver_state_bytes", "spark_state_rows")


def process_figures(pgid: int) -> dict[str, float]:
    """RSS (MB), open descriptors, threads and CPU seconds of a process group and its
    descendants, from /proc."""
    rss_kb = fds = threads = 0
    for pid in group_pids(pgid):
        try:
            status = Path(f"/proc/{pid}/status").read_text().splitlines()
            fds += len(os.listdir(f"/proc/{pid}/fd"))
        except OSError:  # exited meanwhile
            continue
        for line in status:
            if line.startswith("VmRSS:"):
                rss_kb += int(line.split()[1])
            elif line.startswith("Threads:"):
                threads += int(line.split()[1])
    return {
        "rss_mb": rss_kb / 1024,
        "fds": fds,
        "threads": threads,
        "cpu_s": group_cpu_seconds(pgid),
    }


def disk_mb(path: Path) -> float:
    """Bytes allocated under ``path`` (its files' blocks, as ``du`` counts them), in MB."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                continue
    return total / 1e6


def influx_series(settings: Settings, database: str) -> float:
    rows = InfluxClient(settings).rows(database, "SHOW SERIES EXACT CARDINALITY")
    return float(sum(row.get("count", 0) for row in rows))


def sample(
    settings: Settings, pipeline: Pipeline, servers: dict[str, int], database: str, work: Path
) -> dict[str, float]:
    """One row of figures, keyed ``<process>.<figure>`` and ``disk.<part>``."""
    row: dict[str, float] = {}
    for name, service in pipeline.services.items():
        if service.process is not None and name != "simulator":
            for figure, value in process_figures(service.process.pid).items():
                row[f"{name}.{figure}"] = value
    for name, pid in servers.items():
        for figure, value in process_figures(pid).items():
            row[f"{name}.{figure}"] = value
    row["records"] = metric_sum(pipeline.metrics("mqtt_bridge"), "bridge_records_total")
    spark = [pipeline.metrics(name) for name in pipeline.services if name.startswith("spark")]
    for metric in STATE_METRICS:
        row[f"state.{metric}"] = sum(metric_sum(values, metric) for values in spark)
    for part in sorted((settings.run_dir / "data").iterdir()):
        row[f"disk.{part.name}_mb"] = disk_mb(part)
    row["disk.checkpoints_mb"] = disk_mb(work)
    row["disk.logs_mb"] = disk_mb(settings.run_dir / "logs")
    row["influxdb.series"] = influx_series(settings, database)
    return row


def slopes(
    times_h: np.ndarray, rows: list[dict[str, float]], after_h: float
) -> list[tuple[str, float, float | None]]:
    """(figure, value at ``after_h``, slope an hour after it) of every figure; CPU seconds as
    CPU microseconds per record over the same span instead."""
    keep = times_h >= after_h
    out: list[tuple[str, float, float | None]] = []
    for figure in rows[0]:
        values = np.array([row.get(figure, np.nan) for row in rows], dtype=float)
        t, v = times_h[keep], values[keep]
        if len(t) < 2 or np.isnan(v).any():
            continue
        if figure.endswith(".cpu_s"):
            records = np.array([row["records"] for row in rows], dtype=float)[keep]
            per_record = (v[-1] - v[0]) / max(records[-1] - records[0], 1) * 1e6
            out.append((figure.replace(".cpu_s", ".cpu_us_per_record"), per_record, None))
            continue
        slope = float(np.polyfit(t, v, 1)[0])
        out.append((figure, float(v[0]), slope))
    return out


def draw(times: np.ndarray, rows: list[dict[str, float]], path: Path, unit: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures = [f for f in rows[0] if not f.endswith(".cpu_s") and f != "records"]
    columns = 4
    lines = -(-len(figures) // columns)
    fig, axes = plt.subplots(lines, columns, figsize=(4 * columns, 2.2 * lines), squeeze=False)
    for axis, figure in zip(axes.flat, figures, strict=False):
        axis.plot(times, [row.get(figure, np.nan) for row in rows], linewidth=1)
        axis.set_title(figure, fontsize=8)
        axis.tick_params(labelsize=7)
    for axis in axes.flat[len(figures) :]:
        axis.axis("off")
    fig.supxlabel(unit)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


@dataclass
class Samples:
    """The figures over time: ``times`` in hours (steady) or event days (replay)."""

    times: list[float] = field(default_factory=list)
    rows: list[dict[str, float]] = field(default_factory=list)
    restarted: list[tuple[float, str]] = field(default_factory=list)


@dataclass
class Run:
    """What a soak samples: the stack, the stages and where their files are."""

    settings: Settings
    pipeline: Pipeline
    servers: dict[str, int]
    database: str
    work: Path

    def sample_while(
        self, running: Callable[[], bool], clock: Callable[[], float], interval_s: float
    ) -> Samples:
        """Samples every ``interval_s`` while ``running()``, each at ``clock()``; a stage that
        ended is a finding: restarted as a supervisor would, and reported."""
        samples = Samples()
        while running():
            begun = time.monotonic()
            at = clock()
            samples.restarted += [(at, name) for name in self.pipeline.supervise()]
            samples.times.append(at)
            samples.rows.append(
                sample(self.settings, self.pipeline, self.servers, self.database, self.work)
            )
            print(f"  {at:8.3f}: {samples.rows[-1]['records']:,.0f} records", flush=True)
            time.sleep(max(0.0, interval_s - (time.monotonic() - begun)))
        return samples


def steady(run: Run, args: argparse.Namespace) -> Samples:
    """A looped live replay at --rate for --duration; times in hours."""
    events = events_file(max(args.rate * 600, 10_000), args.things)  # looped
    started, first, _ = start_live(run.pipeline, events, args.rate, args.warmup.total_seconds())
    print(f"start: first joined point after {first} s; sampling every {args.interval}")
    duration_s = args.duration.total_seconds()
    return run.sample_while(
        lambda: time.monotonic() - started < duration_s,
        lambda: (time.monotonic() - started) / 3600,
        args.interval.total_seconds(),
    )


def replay_input(work: Path) -> Path:
    """Where the replay's generated rows go: beside the run's directory, so that they are not
    counted as the stages' disk."""
    return work.with_name(f"{work.name}-churn.json")


def replay(run: Run, args: argparse.Namespace) -> Samples:
    """--span of churning fleet replayed at --speed, ending now; times in event days. Sampling
    goes on for two intervals after the replay ended, for what was still in flight."""
    churn = Churn(span=args.span, machines=args.things * 3)
    day_ms = 86_400_000
    start_ms = (int(time.time() * 1000) - int(args.span.total_seconds() * 1000)) // day_ms * day_ms
    events = replay_input(run.work)
    rows = churn_file(churn, start_ms, events)
    print(f"replay: {rows:,} rows, {format_duration(args.span)} of event time at {args.speed:g}x")
    run.pipeline.start_stages()
    run.pipeline.wait_ready()
    simulator = run.pipeline.replay(
        events, "--speed", f"{args.speed:g}", "--order", "file", "--no-progress"
    ).popen
    started = time.monotonic()
    ended: list[float] = []  # when the simulator was first seen gone

    def running() -> bool:
        if simulator.poll() is None:
            return True
        if not ended:
            ended.append(time.monotonic())
        return time.monotonic() - ended[0] < 2 * args.interval.total_seconds()

    return run.sample_while(
        running,
        lambda: (time.monotonic() - started) * args.speed / 86_400,
        args.interval.total_seconds(),
    )


def scaled_retention(speed: float) -> dict[str, str]:
    """The Spark stage's state retention at ``speed``: its default, which counts processing
    time, divided by the replay's factor, so it spans the same event time (whole seconds)."""
    default = JoinSettings.from_sources({}).state_retention
    return {"STATE_RETENTION": f"{max(1, round(default.total_seconds() / speed))}s"}


def report(samples: Samples, settle: float, unit: str, out: Path) -> None:
    """The samples to ``<out>.csv``, the slopes after ``settle`` printed, the picture drawn."""
    if len(samples.rows) < 3:
        raise SystemExit("too short to fit anything: a longer run or a shorter --interval")
    times, rows = np.array(samples.times), samples.rows
    with out.with_suffix(".csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, [unit, *rows[0]])
        writer.writeheader()
        for at, row in zip(times, rows, strict=True):
            writer.writerow({unit: f"{at:.4f}", **row})
    print(f"\n{'figure':<44} {'at ' + f'{settle:g} {unit}':>16} {'slope / ' + unit[:-1]:>16}")
    for figure, level, slope in slopes(times, rows, settle):
        shown = "" if slope is None else f"{slope:+16.3f}"
        print(f"{figure:<44} {level:16.3f} {shown}")
    print(f"stages restarted during the soak: {samples.restarted or 'none'}")
    draw(times, rows, out.with_suffix(".png"), unit)
    print(f"\nsamples: {out.with_suffix('.csv')}; picture: {out.with_suffix('.png')}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replay", action="store_true", help="the event-time replay mode")
    parser.add_argument("--duration", type=parse_duration, default=timedelta(hours=2))
    parser.add_argument("--rate", type=int, default=200, help="rows a second")
    parser.add_argument("--span", type=parse_duration, default=timedelta(days=28))
    parser.add_argument("--speed", type=float, default=1000.0, help="event time per wall time")
    parser.add_argument("--interval", type=parse_duration, default=timedelta(seconds=30))
    parser.add_argument("--warmup", type=parse_duration, default=timedelta(minutes=5))
    parser.add_argument(
        "--settle",
        type=parse_duration,
        default=timedelta(days=8),
        help="replay: event time before the slopes (the state retention and a day)",
    )
    parser.add_argument("--shape", choices=sorted(SHAPES), default=DEFAULT_SHAPE)
    parser.add_argument(
        "--things",
        type=int,
        default=8,
        help="machines (replay: three times as many join over the span, about half at a time)",
    )
    parser.add_argument("--out", type=Path, default=None, help="soak, or soak-replay")
    args = parser.parse_args(argv)
    out = args.out or Path("soak-replay" if args.replay else "soak")
    stack = Stack(Settings.from_sources())
    started_here = stack.groups_not_running()  # stopped again at the end
    settings = stack.up()
    layout = Layout(args.shape)
    wiring = Wiring.fresh(settings, "soak")
    work = Path(tempfile.mkdtemp(prefix="soak-"))
    env = scaled_retention(args.speed) if args.replay else {}
    run = Run(
        settings,
        layout.pipeline(settings, wiring, work, env),
        server_pids(settings, layout),
        wiring.database,
        work,
    )
    try:
        samples = replay(run, args) if args.replay else steady(run, args)
    finally:
        run.pipeline.stop()
        wiring.discard(settings)  # its topics and database
        shutil.rmtree(work, ignore_errors=True)  # checkpoints, logs
        replay_input(work).unlink(missing_ok=True)
        if started_here:
            Stack(settings, started_here).down()
    if args.replay:
        report(samples, args.settle.total_seconds() / 86_400, "event days", out)
    else:
        report(samples, args.warmup.total_seconds() / 3600, "hours", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
