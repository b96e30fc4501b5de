"""End-to-end benchmark: the whole pipeline on this machine (a script, not a test).

    .venv/bin/python benchmarks/bench_e2e.py [--rows 1402232] [--rates 1000,5000,10000]
        [--rate-seconds 30] [--no-full] [--no-rates] [--shapes single-pass,two-jobs]
        [--tls default|on|off|both] [--spark-cluster] [--opstats default|on|off|both]

1. Full replay: a generated events.json of --rows rows (the full size by default; cached in
   ~/.cache/machinedata-stack/) replayed as fast as possible through simulator -> bridge ->
   Spark (the single pass, or the join and the aggregate: --shapes) -> connector -> InfluxDB;
   reported: the time until every stage has drained, rows/s overall, the peak rate of each stage
   and the CPU per raw record of each stage and server over the replay.
2. Fixed rates: for each rate, --rate-seconds worth of rows replayed at that rate in live mode
   (each row stamped with the wall clock when published), so the connector's
   connector_event_latency_seconds histogram measures event -> InfluxDB acknowledgement for
   every raw point; reported: achieved rate, p50/p99 latency, and whether the pipeline kept up.
3. Steady state (--steady-rates): for each rate, a live replay started together with the
   stages; reported separately: the start (stages started -> first joined point acknowledged
   by InfluxDB, JVM warm-up included) and, after --warmup-s, the percentiles of what was
   observed during the next --measure-s only (the connector's histogram, scraped at both ends:
   raw and joined from their event time, a pair's the later input's, the moment its partner
   exists; aggregates from when the data made their window closable, closed_at_ms, so after the
   allowed lateness and a sparse key's wait; windows the idle timeout closed from their end),
   beside the joined ones the data's own wait from there until the pair is certain (a model of
   the replayed rows: docs/join.md), and the CPU each stage and server spent per raw record in
   that window (from /proc).
Each run is done for each pipeline shape of --shapes (stacktools.harness.services.SHAPES), so
the shapes are compared in one run of the script, and for each TLS mode of --tls (both: encrypted
and verified hops against plain TCP, each on a fresh stack of its own, the ratio printed). Each run
gets fresh topics, database and Spark checkpoints (stacktools.harness.wiring.Wiring.fresh).
--opstats both runs each shape with the operation statistics on (OPSTATS_POWER's default) and
off (empty) on the same file, one after the other, and prints the ratio of the CPU per raw
record.
--spark-cluster runs the Spark stages on the launcher's standalone cluster with the executors'
sink (the scaled-out shape; with KAFKA_BROKERS=3 on a stack of three Kafka nodes), the cluster's
daemons and executors counted as servers.
Targets (issue 16): joined p99 <= 2 s and raw p99 <= 0.5 s at 1,000 rows/s in steady state,
first joined point <= 10 s, <= 65 us of CPU per raw record end to end.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.support.e2e_report import print_full, print_rates, print_steady
from benchmarks.support.e2e_steady import (
    Steady,
    cpu_snapshot,
    data_wait,
    measure_window,
    start_live,
)
from benchmarks.support.events import events_file, head
from simulator.generate import DEFAULT_ROWS
from spark_jobs.config import SinglePassSettings
from stacktools.demo.histograms import histogram_buckets, percentile
from stacktools.demo.run import Replay, replay_until_drained
from stacktools.harness.pipeline import Pipeline
from stacktools.harness.scrape import metric_sum
from stacktools.harness.services import DEFAULT_SHAPE, SHAPES
from stacktools.harness.wiring import Wiring
from stacktools.stack import Stack
from stacktools.stack.influx import InfluxClient
from stacktools.stack.servers import DEFAULT_GROUPS
from stacktools.stack.servers.spark import scaled_out_spark_env
from stacktools.stack.settings import Settings


@dataclass(frozen=True)
class Layout:
    """Where a run's Spark stages run: the shape, on ``local[2]`` or on the launcher's cluster."""

    shape: str
    spark_cluster: bool = False
    #: "default" (as configured), "on" or "off": the operation statistics
    opstats: str = "default"

    @property
    def groups(self) -> list[str]:
        """The stack's server groups this layout uses."""
        return [*DEFAULT_GROUPS, *(["spark"] if self.spark_cluster else [])]

    def pipeline(
        self, settings: Settings, wiring: Wiring, work: Path, env: dict[str, str] | None = None
    ) -> Pipeline:
        """The stages of this layout, with ``env`` added to their settings."""
        env = {**(scaled_out_spark_env(settings) if self.spark_cluster else {}), **(env or {})}
        if self.opstats != "default":
            on = self.opstats == "on"
            env["OPSTATS_POWER"] = STATS_ON if on else ""
        run_dir = work / wiring.query_suffix.strip("-")
        return Pipeline(settings, wiring, run_dir, shape=self.shape, env=env)


def run_once(
    settings: Settings,
    events: Path,
    replay_args: list[str],
    work: Path,
    timeout_s: float,
    layout: Layout,
) -> tuple[Replay, dict[str, float]]:
    """The replay, and the CPU µs per raw record of each stage and server from the replay's start
    to drained (the simulator's is missing: it has exited by then)."""
    wiring = Wiring.fresh(settings, "bench")
    pipeline = layout.pipeline(settings, wiring, work)
    servers = server_pids(settings, layout)
    try:
        pipeline.start_stages()
        pipeline.wait_ready()  # JVM start-up is not part of the pipeline's speed
        cpu_before = cpu_snapshot(pipeline, servers)
        replay = replay_until_drained(pipeline, events, replay_args, timeout_s)
        cpu_after = cpu_snapshot(pipeline, servers)
        records = metric_sum(pipeline.metrics("mqtt_bridge"), "bridge_records_total")
        cpu = (
            {
                name: (cpu_after[name] - cpu_before.get(name, 0.0)) / records * 1e6
                for name in cpu_after
                if name != "simulator"
            }
            if records
            else {}
        )
        return replay, cpu
    finally:
        pipeline.stop()
        InfluxClient(settings).drop_database(wiring.database)


#: OPSTATS_POWER's default: the statistics on, as a user's stack runs them.
STATS_ON = str(
    next(f.default for f in dataclasses.fields(SinglePassSettings) if f.name == "opstats_power")
)


def server_pids(settings: Settings, layout: Layout) -> dict[str, int]:
    """The stack's servers the pipeline uses (Prometheus only watches)."""
    statuses = Stack(settings, layout.groups).status()
    return {s.name: s.pid for s in statuses if s.pid and s.name != "prometheus"}


def steady_run(
    settings: Settings,
    events: Path,
    rate: int,
    warmup_s: float,
    measure_s: float,
    work: Path,
    layout: Layout,
) -> Steady:
    """One live replay at ``rate``: the start, then the steady-state window."""
    wiring = Wiring.fresh(settings, "steady")
    pipeline = layout.pipeline(settings, wiring, work)
    servers = server_pids(settings, layout)
    try:
        started, first, ready_joined = start_live(pipeline, events, rate, warmup_s)
        time.sleep(max(0.0, warmup_s - (time.monotonic() - started)))
        window = measure_window(pipeline, servers, measure_s)
    finally:
        pipeline.stop()
        InfluxClient(settings).drop_database(wiring.database)
    return Steady(
        layout.shape,
        rate,
        window.delta("simulator", "simulator_rows_published_total") / window.seconds,
        first,
        ready_joined,
        window.latency(),
        window.cpu_us_per_record(),
    )


def stack_for(base: Settings, tls: bool, mode: str, groups: list[str]) -> Settings:
    """The stack a mode runs on: the configured one, or one of its own per TLS mode."""
    if mode == "default":
        return Stack(base, groups).up()
    name = f"bench-tls-{'on' if tls else 'off'}"
    # read anew for the run dir: its credentials are its own, not the configured stack's
    environ = {**os.environ, "STACK_RUN_DIR": str(base.run_dir / name), "TLS": str(tls).lower()}
    return Stack(Settings.from_sources(environ=environ), groups).up()


def parse_args() -> tuple[argparse.Namespace, list[str]]:
    """The command line, and the shapes it names (an unknown one ends the script at once, before
    any stack starts)."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=DEFAULT_ROWS)
    parser.add_argument("--things", type=int, default=100)
    parser.add_argument("--rates", default="1000,5000,10000")
    parser.add_argument("--rate-seconds", type=float, default=30)
    parser.add_argument("--no-full", action="store_true", help="skip the full replay")
    parser.add_argument("--no-rates", action="store_true", help="skip the fixed-rate latency runs")
    parser.add_argument("--timeout-s", type=float, default=3600)
    parser.add_argument(
        "--steady-rates",
        default="",
        help="rates of steady-state runs, e.g. 1000,3000 (default: none)",
    )
    parser.add_argument("--warmup-s", type=float, default=90)
    parser.add_argument("--measure-s", type=float, default=150)
    parser.add_argument(
        "--shapes",
        default=DEFAULT_SHAPE,
        help=f"comma list of pipeline shapes to run and compare, of: {', '.join(SHAPES)}",
    )
    parser.add_argument(
        "--tls",
        choices=["default", "on", "off", "both"],
        default="default",
        help="default: the stack as configured (TLS setting); on/off/both: a stack of its own "
        "per mode, in <run dir>/bench-tls-on|off on the same ports (stop the usual stack "
        "first), each stopped after its runs; both prints the ratio",
    )
    parser.add_argument(
        "--spark-cluster",
        action="store_true",
        help="the Spark stages on the launcher's standalone cluster (started if needed) with the "
        "executors' sink; KAFKA_BROKERS=3 gives the whole scaled-out stack",
    )
    parser.add_argument(
        "--opstats",
        choices=["default", "on", "off", "both"],
        default="default",
        help="the operation statistics as configured, on, off, or both one after the other "
        "(the ratio of the CPU per raw record printed)",
    )
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=None,
        help="keep the stages' logs and checkpoints here (default: a temporary directory, removed)",
    )
    args = parser.parse_args()
    shapes = [shape.strip() for shape in args.shapes.split(",") if shape.strip()]
    unknown = set(shapes) - set(SHAPES)
    if unknown:
        parser.error(f"unknown shapes {sorted(unknown)}; known: {', '.join(SHAPES)}")
    return args, shapes


@dataclass
class Results:
    """Every run's row, kept until all runs are done so that the tables print together."""

    rows_table: list[tuple[Any, ...]] = dataclasses.field(default_factory=list)
    rate_table: list[tuple[Any, ...]] = dataclasses.field(default_factory=list)
    steady: list[Steady] = dataclasses.field(default_factory=list)


def run_all(
    args: argparse.Namespace, shapes: list[str], base: Settings, events: Path, work: Path
) -> Results:
    """Every run the command line asks for: per TLS mode a stack, on it per shape and statistics
    mode the full replay, the fixed rates and the steady states, so they compare in one run."""
    results = Results()
    modes = {"default": [base.tls], "on": [True], "off": [False], "both": [True, False]}[args.tls]
    groups = Layout(DEFAULT_SHAPE, args.spark_cluster).groups
    for tls in modes:
        settings = stack_for(base, tls, args.tls, groups)
        stats_modes = ["on", "off"] if args.opstats == "both" else [args.opstats]
        for shape, stats in [(shape, stats) for shape in shapes for stats in stats_modes]:
            layout = Layout(shape, args.spark_cluster, stats)
            setup = Setup(args, settings, events, work, layout, run_label(args, shape, tls, stats))
            if not args.no_full:
                results.rows_table.append(full_replay(setup))
            for rate in [] if args.no_rates else [int(r) for r in args.rates.split(",")]:
                results.rate_table.append(fixed_rate(setup, rate))
            for rate in [int(r) for r in args.steady_rates.split(",") if r]:
                results.steady.append(steady_state(setup, rate))
                print(results.steady[-1], flush=True)
        if args.tls != "default":
            Stack(settings, groups).down()  # the next mode's servers take the same ports
    return results


@dataclass(frozen=True)
class Setup:
    """What every run of one layout on one stack shares, handed around as one."""

    args: argparse.Namespace
    settings: Settings
    events: Path
    work: Path
    layout: Layout
    #: the run's name in the tables
    label: str


def run_label(args: argparse.Namespace, shape: str, tls: bool, stats: str) -> str:
    """A run's name in the tables: the shape, and each switch the command line varies."""
    label = shape + (", Spark cluster" if args.spark_cluster else "")
    if args.tls != "default":
        label += f", TLS {'on' if tls else 'off'}"
    if stats != "default":
        label += f", statistics {stats}"
    return label


def full_replay(setup: Setup) -> tuple[Any, ...]:
    """The whole file as fast as possible: the throughput row (time to drained, peak rate per
    stage, CPU per raw record)."""
    args, events, label = setup.args, setup.events, setup.label
    print(f"[{label}] full replay of {events.name} as fast as possible ...", flush=True)
    # generated: in order
    run, cpu = run_once(
        setup.settings, events, ["--order", "file"], setup.work, args.timeout_s, setup.layout
    )
    peaks = {name: round(run.samples.peak_rate(name, 10)) for name in run.samples.counters}
    return (label, args.rows, run.elapsed_s, args.rows / run.elapsed_s, run.drained, peaks, cpu)


def fixed_rate(setup: Setup, rate: int) -> tuple[Any, ...]:
    """--rate-seconds worth of rows at ``rate`` with live stamps: the latency row (p50 and p99
    of raw and joined over the whole replay, how long draining took after the last row)."""
    rows = int(rate * setup.args.rate_seconds)
    print(f"[{setup.label}] {rows:,} rows at {rate:,} rows/s, live timestamps ...", flush=True)
    run, _ = run_once(
        setup.settings,
        head(setup.events, rows, setup.work),
        ["--rate", str(rate), "--live", "--order", "file"],
        setup.work,
        setup.args.timeout_s,
        setup.layout,
    )
    latencies = []
    for measurement in ("raw", "joined"):
        buckets = histogram_buckets(
            run.metrics.get("db_connector", {}),
            "connector_event_latency_seconds",
            f'measurement="{measurement}"',
        )
        latencies += [percentile(buckets, 0.5), percentile(buckets, 0.99)]
    replay_s = float(run.simulator.get("seconds", run.elapsed_s))
    return (
        setup.label,
        rate,
        float(run.simulator.get("rows_per_s", 0)),
        *latencies,
        run.drained,
        run.elapsed_s - replay_s,
    )


def steady_state(setup: Setup, rate: int) -> Steady:
    """A steady-state run at ``rate``, with the data's own wait modelled after it (so the model's
    CPU does not count in the run's)."""
    args, work = setup.args, setup.work
    # looped: live stamps are new
    rows = min(args.rows, int(rate * (args.warmup_s + args.measure_s)))
    print(
        f"[{setup.label}] steady state at {rate:,} rows/s: "
        f"{args.warmup_s:.0f} s warm-up, {args.measure_s:.0f} s measured ...",
        flush=True,
    )
    replayed = head(setup.events, rows, work)
    result = steady_run(
        setup.settings, replayed, rate, args.warmup_s, args.measure_s, work, setup.layout
    )
    wait = data_wait(replayed, rate, args.warmup_s)  # after the run: its CPU
    return dataclasses.replace(result, shape=setup.label, data_wait=wait)


def main() -> int:
    args, shapes = parse_args()
    base = Settings.from_sources()
    events = events_file(args.rows, args.things)
    with tempfile.TemporaryDirectory(prefix="bench-e2e-") as tmp:
        work = args.work_dir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        results = run_all(args, shapes, base, events, work)
    print(
        "\nCommand: `"
        + " ".join(["python", "benchmarks/bench_e2e.py", *map(shlex.quote, sys.argv[1:])])
        + "`\n"
    )
    if results.rows_table:
        print_full(results.rows_table)
    if results.rate_table:
        print_rates(results.rate_table)
    if results.steady:
        print_steady(results.steady, args.warmup_s, args.measure_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
