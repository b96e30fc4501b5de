"""Verdict: the driver-side sink stays the default; the executors' sink is slower per batch.

Exactly-once sink throughput: the driver-side sink against the executors' sink (a script).

    .venv/bin/python benchmarks/experiments/bench_sinks.py [--rows 50000,200000] [--batches 6]
        [--master local[2]] [--sink-partitions 2] [--value-bytes 120]

For each batch size, a generated batch of output rows (a 20-byte key, a --value-bytes value,
a Kafka partition; computed by Spark, so the executors hold it, as a job's output) is written
as batches 0..N-1 of a fresh query to a fresh 4-partition topic by each sink in turn, through
the sinks' own ``foreachBatch`` functions on one Spark session. Reported per sink: median
seconds per batch after the first (warm-up), output rows/s, and the ratio of the executors'
sink to the driver's; the driver process's peak RSS is printed at the end. ``--master
spark://...`` runs it on a cluster (``python -m stacktools.stack up spark``).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
import uuid

from pyspark import SparkContext

from spark_jobs.config import SparkJobSettings
from spark_jobs.eos_sink import ExactlyOnceSink
from spark_jobs.executor_sink import ExecutorSink
from spark_jobs.session import build_session
from stacktools.harness.wiring import private_topic
from stacktools.stack import Stack
from stacktools.stack.settings import Settings


def output_rows(spark, topic: str, rows: int, value_bytes: int, partitions: int):
    from pyspark.sql import functions as F

    return spark.range(0, rows, 1, 4).select(
        F.lit(topic).alias("topic"),
        F.format_string("key-%015d", "id").cast("binary").alias("key"),
        F.expr(f"repeat('x', {value_bytes})").cast("binary").alias("value"),
        (F.col("id") % partitions).cast("int").alias("partition"),
    )


def peak_rss_mb(pid: int) -> float:
    """A process's peak resident memory (VmHWM), MB."""
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def timed_batches(sink, frame, batches: int) -> list[float]:
    seconds = []
    for batch_id in range(batches):
        started = time.perf_counter()
        sink(frame, batch_id)
        seconds.append(time.perf_counter() - started)
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", default="50000,200000", help="output rows per batch, comma list")
    parser.add_argument("--batches", type=int, default=6)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--sink-partitions", type=int, default=2)
    parser.add_argument("--value-bytes", type=int, default=120)
    args = parser.parse_args()
    admin = Stack(Settings.from_sources()).up()
    settings = SparkJobSettings.from_sources()
    spark = build_session(
        "bench-sinks",
        args.master,
        2,
        cluster_secret=settings.credential("spark", "cluster").reveal(),
    )
    spark.sparkContext.setLogLevel("ERROR")
    table = []
    try:
        for rows in (int(r) for r in args.rows.split(",")):
            results = {}
            for kind in ("driver", "executors"):
                topic = private_topic(admin, "joined", 4)
                markers = private_topic(admin, "markers", 1, compact=True)
                query = f"bench-{kind}-{uuid.uuid4().hex[:6]}"
                sink = (
                    ExactlyOnceSink(settings, query, markers)
                    if kind == "driver"
                    else ExecutorSink(settings, query, markers, args.sink_partitions)
                )
                print(
                    f"{kind} sink, {rows:,} rows per batch, {args.batches} batches ...", flush=True
                )
                seconds = timed_batches(
                    sink, output_rows(spark, topic, rows, args.value_bytes, 4), args.batches
                )
                sink.close()
                median = statistics.median(seconds[1:])
                results[kind] = median
                table.append((rows, kind, seconds[0], median, rows / median))
            table.append(
                (rows, "ratio executors/driver", 0.0, 0.0, results["driver"] / results["executors"])
            )
    finally:
        gateway = SparkContext._gateway
        assert gateway is not None, "the session's JVM is gone"
        jvm_peak_mb = peak_rss_mb(gateway.proc.pid)
        spark.stop()
    print(
        "\nCommand: python benchmarks/experiments/bench_sinks.py "
        f"{' '.join(sys.argv[1:])}  (master {args.master}, "
        f"{args.sink_partitions} output partitions)\n"
    )
    print("| rows per batch | sink | first batch s | median batch s | output rows/s |")
    print("|---:|---|---:|---:|---:|")
    for rows, kind, first, median, rate in table:
        if kind.startswith("ratio"):
            print(f"| {rows:,} | **{kind}** | | | **{rate:.2f}x** |")
        else:
            print(f"| {rows:,} | {kind} | {first:.2f} | {median:.2f} | {rate:,.0f} |")
    print(
        "\npeak RSS: driver Python "
        f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB, driver JVM "
        f"{jvm_peak_mb:,.0f} MB (local masters: the executors too)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
