"""End-to-end benchmark: the whole pipeline on this machine (a script, not a test).

    .venv/bin/python benchmarks/bench_e2e.py [--rows 1402232] [--rates 1000,5000,10000]
        [--rate-seconds 30] [--no-full] [--no-rates]

1. Full replay: a generated events.json of --rows rows (the full size by default; cached in
   ~/.cache/machinedata-stack/) replayed as fast as possible through simulator -> bridge ->
   Spark join + aggregates -> connector -> InfluxDB; reported: the time until every stage has
   drained, rows/s overall and the peak rate of each stage.
2. Fixed rates: for each rate, --rate-seconds worth of rows replayed at that rate in live mode
   (each row stamped with the wall clock when published), so the connector's
   connector_event_latency_seconds histogram measures event -> InfluxDB acknowledgement for
   every raw point; reported: achieved rate, p50/p99 latency, and whether the pipeline kept up.
Each run gets fresh topics, database and Spark checkpoints (stacktools.pipeline.Wiring.fresh).
Targets (issue 7): full replay <= 5 min; p99 event -> InfluxDB <= 2 s at 10k rows/s.
"""
from __future__ import annotations

import argparse
import itertools
import json
import shlex
import sys
import tempfile
from pathlib import Path


from simulator.generate import DEFAULT_ROWS, generate
from streamkit.config import Settings
from stacktools.demo.report import histogram_buckets, percentile
from stacktools.demo.run import Replay, replay_until_drained
from stacktools.influx import InfluxClient
from stacktools.pipeline import Pipeline
from stacktools.wiring import Wiring
from stacktools.stack import Stack

CACHE = Path.home() / ".cache" / "machinedata-stack"


def events_file(rows: int, things: int) -> Path:
    path = CACHE / f"events-{rows}-{things}.json"
    if not path.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        with partial.open("w") as handle:
            for index, row in enumerate(generate(rows, things, seed=1)):
                handle.write(json.dumps(row) + "\n")
                if index % 200_000 == 0:
                    print(f"  generating {path.name}: {index:,}/{rows:,} rows", flush=True)
        partial.rename(path)
    return path


def head(path: Path, rows: int, work: Path) -> Path:
    out = work / f"head-{rows}.json"
    with path.open("rb") as source, out.open("wb") as target:
        target.writelines(itertools.islice(source, rows))
    return out


def run_once(settings: Settings, events: Path, replay_args: list[str], work: Path, timeout_s: float) -> Replay:
    wiring = Wiring.fresh(settings, "bench")
    pipeline = Pipeline(settings, wiring, work / wiring.query_suffix.strip("-"))
    try:
        pipeline.start_stages()
        pipeline.wait_ready()  # JVM start-up is not part of the pipeline's speed
        return replay_until_drained(pipeline, events, replay_args, timeout_s)
    finally:
        pipeline.stop()
        InfluxClient(settings).drop_database(wiring.database)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=DEFAULT_ROWS)
    parser.add_argument("--things", type=int, default=100)
    parser.add_argument("--rates", default="1000,5000,10000")
    parser.add_argument("--rate-seconds", type=float, default=30)
    parser.add_argument("--no-full", action="store_true", help="skip the full replay")
    parser.add_argument("--no-rates", action="store_true", help="skip the fixed-rate latency runs")
    parser.add_argument("--timeout-s", type=float, default=3600)
    args = parser.parse_args()
    settings = Stack(Settings.from_sources()).up()
    events = events_file(args.rows, args.things)
    rows_table, rate_table = [], []
    with tempfile.TemporaryDirectory(prefix="bench-e2e-") as tmp:
        work = Path(tmp)
        if not args.no_full:
            print(f"full replay of {events.name} as fast as possible ...", flush=True)
            run = run_once(settings, events, ["--order", "file"], work, args.timeout_s)  # generated: in order
            peaks = {name: round(run.samples.peak_rate(name, 10)) for name in run.samples.counters}
            rows_table.append((args.rows, run.elapsed_s, args.rows / run.elapsed_s, run.drained, peaks))
        for rate in ([] if args.no_rates else [int(r) for r in args.rates.split(",")]):
            rows = int(rate * args.rate_seconds)
            print(f"{rows:,} rows at {rate:,} rows/s, live timestamps ...", flush=True)
            run = run_once(settings, head(events, rows, work), ["--rate", str(rate), "--live", "--order", "file"], work,
                           args.timeout_s)
            latencies = []
            for measurement in ("raw", "joined"):
                buckets = histogram_buckets(run.metrics.get("db_connector", {}), "connector_event_latency_seconds",
                                            f'measurement="{measurement}"')
                latencies += [percentile(buckets, 0.5), percentile(buckets, 0.99)]
            replay_s = float(run.simulator.get("seconds", run.elapsed_s))
            rate_table.append((rate, float(run.simulator.get("rows_per_s", 0)), *latencies, run.drained,
                               run.elapsed_s - replay_s))
    print("\nCommand: `" + " ".join(["python", "benchmarks/bench_e2e.py", *map(shlex.quote, sys.argv[1:])]) + "`\n")
    if rows_table:
        print("| rows | seconds to drained | rows/s | drained | peak per stage (10 s, per s) |")
        print("|---:|---:|---:|---|---|")
        for rows, seconds, per_s, drained, peaks in rows_table:
            print(f"| {rows:,} | {seconds:,.0f} | {per_s:,.0f} | {drained} | "
                  + ", ".join(f"{k} {v:,}" for k, v in peaks.items()) + " |")
    if rate_table:
        print("\n| target rows/s | achieved rows/s | raw p50 s | raw p99 s | joined p50 s | joined p99 s | drained "
              "| drained s after the last row |")
        print("|---:|---:|---:|---:|---:|---:|---|---:|")
        for rate, achieved, raw50, raw99, joined50, joined99, drained, tail in rate_table:
            def fmt(value: float | None) -> str:
                return "n/a" if value is None else f"{value:.2f}"
            print(f"| {rate:,} | {achieved:,.0f} | {fmt(raw50)} | {fmt(raw99)} | {fmt(joined50)} | {fmt(joined99)} "
                  f"| {drained} | {tail:.1f} |")
        print("\nLatency: event time (live: the wall clock at publish) -> InfluxDB acknowledged the point, from the "
              "connector's connector_event_latency_seconds histogram (bucket-interpolated).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
