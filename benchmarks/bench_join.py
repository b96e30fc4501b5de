"""Benchmark: the streaming join job with exactly-once output (a script, not a test).

    .venv/bin/python benchmarks/bench_join.py [--rows 100000] [--batch-sizes 10000,50000,200000]

Generates a file, writes its measurements to a private raw topic the way the bridge does, then
for each batch size runs `python -m spark_jobs.join --available-now` (fresh checkpoint, private
output topics) and reports, from the job's own per-batch progress log: sustained input
records/s and joins/s over the processing time (Spark start-up excluded), batch latency p50/p99,
and the peak RSS of the driver (Python), its JVM and the Python workers. The baseline is the
library's batch path run on the same records in this process (no Spark, no Kafka): what the
join itself costs, so the ratio shows what the streaming machinery adds.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.support.raw_feed import StreamRecord, feed
from benchmarks.support.spark_run import PAIRS, JobRun, run_job
from lsb import LocalStreamBuffer
from spark_jobs.config import JoinSettings
from spark_jobs.join import join_plan
from stacktools.harness.wiring import private_topic
from stacktools.stack import Stack
from stacktools.stack.settings import Settings


def baseline_joins_per_s(streams: dict[str, list[StreamRecord]]) -> tuple[int, float]:
    import numpy as np

    config = join_plan(JoinSettings.from_sources(cli={"pairs": PAIRS})).config(())
    buffer = LocalStreamBuffer(config)
    started = time.perf_counter()
    pairs = 0
    for thing, records in streams.items():
        quantities = np.array([r[0] for r in records], dtype=object)
        times = np.array([r[1] for r in records], dtype=np.int64)
        values = np.array([r[2] for r in records], dtype=np.float64)
        pairs += len(buffer.push_batch(thing, quantities, times, values).pairs)
    return pairs, pairs / (time.perf_counter() - started)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--batch-sizes", default="10000,50000,200000")
    parser.add_argument(
        "--work-dir", type=Path, help="keep checkpoints and job logs here (default: a temp dir)"
    )
    args = parser.parse_args()
    settings = Stack(Settings.from_sources()).up()
    raw = private_topic(settings, "raw", 4)
    print(f"feeding {args.rows:,} generated rows into {raw} ...", flush=True)
    plan = join_plan(JoinSettings.from_sources(cli={"pairs": PAIRS}))
    wanted = frozenset(plan.config(()).quantities)
    records, streams = feed(settings, raw, args.rows, wanted)
    base_pairs, base_rate = baseline_joins_per_s(streams)
    print(
        f"{records:,} raw records; in-process batch path: {base_pairs:,} pairs at {base_rate:,.0f} "
        "joins/s",
        flush=True,
    )
    results: list[JobRun] = []
    with tempfile.TemporaryDirectory(prefix="bench-join-") as tmp:
        work = args.work_dir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for batch in (int(b) for b in args.batch_sizes.split(",")):
            print(f"join job, maxOffsetsPerTrigger={batch:,} ...", flush=True)
            results.append(run_job(settings, raw, batch, work))
            r = results[-1]
            print(
                f"  {len(r.progress)} batches, {r.records_per_s:,.0f} records/s "
                f"({r.warm_records_per_s:,.0f} after the first batch), "
                f"{r.joins_per_s:,.0f} joins/s",
                flush=True,
            )
    print()
    print(
        f"{'batch size':>10} {'batches':>8} {'records/s':>10} {'warm rec/s':>10} "
        f"{'warm joins/s':>12} {'p50 s':>6} {'p99 s':>6} {'driver MB':>9} {'JVM MB':>7} "
        f"{'workers MB':>10} {'vs batch path':>13}"
    )
    for r in results:
        rss = r.rss_mb
        warm_joins = r.warm_records_per_s * r.joins / r.input_records
        print(
            f"{r.batch:>10,} {len(r.progress):>8} {r.records_per_s:>10,.0f} "
            f"{r.warm_records_per_s:>10,.0f} {warm_joins:>12,.0f} "
            f"{r.batch_percentile_s(0.5):>6.2f} {r.batch_percentile_s(0.99):>6.2f} "
            f"{rss.get('driver', 0):>9,.0f} {rss.get('jvm', 0):>7,.0f} "
            f"{rss.get('python workers', 0):>10,.0f} {r.joins_per_s / base_rate:>12.3f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
