"""Soak benchmark: the whole pipeline at a steady rate for a long time (a script, not a test).

    .venv/bin/python benchmarks/soak.py [--duration 2h] [--rate 200] [--interval 30s]
        [--warmup 5m] [--shape single-pass] [--out soak]

The stack (started if it is not running) and the stages of --shape take a looped live replay
at --rate rows a second (the simulator stamps every row with the wall clock, so event time
advances as in a plant). Every --interval it samples, for every stage and server: resident
memory, open file descriptors, threads and CPU seconds (each a process group with its
descendants: a Spark driver with its JVM and Python workers); the Spark stage's state (the
driver's keys and bytes, Spark's state rows and memory); the raw records the bridge has taken;
the size on disk of each server's data, the stages' checkpoints and the logs; InfluxDB's series.

After the warm-up it fits a straight line to each figure and prints the slope an hour, beside
the figure's value at the end of the warm-up, so that growth stands out from level: a memory
leak of 1 MB an hour, a file descriptor per reconnect. It writes every sample to
``<out>.csv`` and draws every figure in one picture, ``<out>.png``.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import numpy as np

from benchmarks.bench_e2e import Layout, server_pids
from benchmarks.support.e2e_steady import start_live
from benchmarks.support.events import events_file
from stacktools.harness.cpu import group_cpu_seconds, group_pids
from stacktools.harness.pipeline import Pipeline
from stacktools.harness.scrape import metric_sum
from stacktools.harness.services import DEFAULT_SHAPE, SHAPES
from stacktools.harness.wiring import Wiring
from stacktools.stack import Stack
from stacktools.stack.influx import InfluxClient
from stacktools.stack.settings import Settings
from streamkit.durations import parse_duration

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


def draw(times_h: np.ndarray, rows: list[dict[str, float]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures = [f for f in rows[0] if not f.endswith(".cpu_s") and f != "records"]
    columns = 4
    lines = -(-len(figures) // columns)
    fig, axes = plt.subplots(lines, columns, figsize=(4 * columns, 2.2 * lines), squeeze=False)
    for axis, figure in zip(axes.flat, figures, strict=False):
        axis.plot(times_h, [row.get(figure, np.nan) for row in rows], linewidth=1)
        axis.set_title(figure, fontsize=8)
        axis.tick_params(labelsize=7)
    for axis in axes.flat[len(figures) :]:
        axis.axis("off")
    fig.supxlabel("hours")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=parse_duration, default=timedelta(hours=2))
    parser.add_argument("--rate", type=int, default=200, help="rows a second")
    parser.add_argument("--interval", type=parse_duration, default=timedelta(seconds=30))
    parser.add_argument("--warmup", type=parse_duration, default=timedelta(minutes=5))
    parser.add_argument("--shape", choices=sorted(SHAPES), default=DEFAULT_SHAPE)
    parser.add_argument("--things", type=int, default=8)
    parser.add_argument("--out", type=Path, default=Path("soak"))
    args = parser.parse_args(argv)
    stack = Stack(Settings.from_sources())
    started_here = stack.groups_not_running()  # stopped again at the end
    settings = stack.up()
    layout = Layout(args.shape)
    events = events_file(max(args.rate * 600, 10_000), args.things)  # looped
    wiring = Wiring.fresh(settings, "soak")
    work = Path(tempfile.mkdtemp(prefix="soak-"))
    pipeline = layout.pipeline(settings, wiring, work)
    servers = server_pids(settings, layout)
    duration_s, interval_s = args.duration.total_seconds(), args.interval.total_seconds()
    rows: list[dict[str, float]] = []
    times: list[float] = []
    restarted: list[tuple[float, str]] = []
    try:
        started, first, _ = start_live(pipeline, events, args.rate, args.warmup.total_seconds())
        print(f"start: first joined point after {first} s; sampling every {interval_s:.0f} s")
        while (elapsed := time.monotonic() - started) < duration_s:
            # a stage that ended is a finding: restarted as a supervisor would, and reported
            restarted += [(elapsed, name) for name in pipeline.supervise()]
            times.append(elapsed / 3600)
            rows.append(sample(settings, pipeline, servers, wiring.database, work))
            print(
                f"  {timedelta(seconds=int(elapsed))}: {rows[-1]['records']:,.0f} records",
                flush=True,
            )
            time.sleep(max(0.0, interval_s - (time.monotonic() - started - elapsed)))
    finally:
        pipeline.stop()
        InfluxClient(settings).drop_database(wiring.database)
        if started_here:
            Stack(settings, started_here).down()
    if len(rows) < 3:
        raise SystemExit("too short to fit anything: a longer --duration or a shorter --interval")
    times_h = np.array(times)
    with args.out.with_suffix(".csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, ["hours", *rows[0]])
        writer.writeheader()
        for hours, row in zip(times_h, rows, strict=True):
            writer.writerow({"hours": f"{hours:.4f}", **row})
    warm_h = args.warmup.total_seconds() / 3600
    print(f"\n{'figure':<44} {'at warm-up end':>16} {'slope / hour':>14}")
    for figure, level, slope in slopes(times_h, rows, warm_h):
        shown = "" if slope is None else f"{slope:+14.3f}"
        print(f"{figure:<44} {level:16.3f} {shown}")
    print(f"stages restarted during the soak: {restarted or 'none'}")
    draw(times_h, rows, args.out.with_suffix(".png"))
    print(f"\nsamples: {args.out.with_suffix('.csv')}; picture: {args.out.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
