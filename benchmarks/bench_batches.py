"""What one live micro-batch of the single pass costs, and where its time goes (a script).

    .venv/bin/python benchmarks/bench_batches.py [--rate 1000] [--things 100] [--warmup-s 45]
        [--measure-s 60] [--variants default,changelog,one-partition,...]

For each variant (Spark settings and job settings, see VARIANTS) the single pass runs live on
fresh topics while a feeder writes generated rows into its raw topic at --rate rows/s, each
stamped with the wall clock, as the bridge writes them (no MQTT hop: this measures Spark alone).
After --warmup-s, over --measure-s: the batches' wall time and Spark's phases (median, p90),
records per batch, the CPU of the job's process group per raw record, and the latency of the
joined pairs from their event time (when both inputs existed) to being readable (committed) in
the joined topic. The same runs, one after the other, so the variants are compared on one
machine state; the default variant is the baseline of the ratios.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.support.certainty import inherent_waits
from benchmarks.support.live import LiveFeed, committed_tail
from benchmarks.support.process_group import GroupSampler
from benchmarks.support.quantile import quantile
from benchmarks.support.spark_run import batch_progress, log_time, role_of
from benchmarks.support.spark_run import job_args as spark_job_args
from benchmarks.support.timing import status
from stacktools.harness.processes import ServiceProcess
from stacktools.harness.wiring import private_topic
from stacktools.stack import Stack
from stacktools.stack.settings import Settings
from streamkit.wire.avro import AvroCodec

MODULE = "spark_jobs.single_pass"
#: name -> environment of the job (its settings; SPARK_CONF for Spark's own), each against the
#: defaults
VARIANTS: dict[str, dict[str, str]] = {
    "default": {},
    "pyspark-daemon": {"SPARK_CONF": "spark.python.daemon.module=pyspark.daemon"},
    "no-changelog": {
        "SPARK_CONF": "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled=false"
    },
    "two-partitions": {"SPARK_SHUFFLE_PARTITIONS": "2"},
    "warm-up": {"SPARK_WARM_PYTHON_WORKERS": "true"},
    "trigger-0.5s": {"SPARK_TRIGGER": "500ms"},
    "trigger-0.25s": {"SPARK_TRIGGER": "250ms"},
    "state-executors": {"SPARK_STATE": "executors"},  # Spark's state store, not the driver's
}
PHASES = ("latestOffset", "queryPlanning", "addBatch", "walCommit", "commitOffsets")
SINK_PHASES = ("collect", "state", "produce", "commit")
STATE_TIMES = (
    "updates",
    "removals",
    "commit",
    "rocksdbCommitFlushLatency",
    "rocksdbCommitCheckpointLatency",
    "rocksdbCommitWriteBatchLatency",
)


class JoinedLatency(threading.Thread):
    """Reads the joined topic (read_committed) as it grows: (wall time read, latency) per pair."""

    def __init__(self, settings: Settings, topic: str) -> None:
        super().__init__(daemon=True)
        self.settings, self.topic = settings, topic
        self.stop = threading.Event()
        self.samples: list[tuple[float, float]] = []

    def run(self) -> None:
        codec = AvroCodec("joined")
        consumer = committed_tail(self.settings, "bench-batches-read", self.topic, "earliest")
        try:
            while not self.stop.is_set():
                for message in consumer.consume(10000, 0.05):
                    value = message.value()
                    if message.error() is None and value is not None:
                        now = time.time()
                        self.samples.append(
                            (now, now - codec.decode(value)["event_time_ms"] / 1000)
                        )
        finally:
            consumer.close()


@dataclass(frozen=True)
class VariantRun:
    name: str
    batches: list[dict]
    records: int
    cpu_s: float
    window_s: float
    latencies: list[float]
    running_s: float  #: process start -> query running (JVM, session, query start)
    first_batch_s: float  #: process start -> the first batch with input committed
    first_phases: dict[str, int]  #: that batch's phases (ms)
    commits: list[dict]  #: the sink's "batch committed" events in the window
    idle_cpu: float  #: CPU s/s of the job once the feed stopped (no-data batches)

    def sink_phase(self, name: str) -> float:
        """Median seconds of a phase of the sink inside addBatch (collect runs the whole plan)."""
        values = [c.get("phases_s", {}).get(name, 0.0) for c in self.commits]
        return statistics.median(values) if values else float("nan")

    def state_time(self, name: str) -> float:
        """Median seconds of the state operators' time (the batch progress' state_ms)."""
        values = [b.get("state_ms", {}).get(name, 0) / 1000 for b in self.batches]
        return statistics.median(values) if values else float("nan")

    def duration(self, q: float) -> float:
        return quantile([b["duration_ms"] / 1000 for b in self.batches], q)

    def phase(self, name: str) -> float:
        return statistics.median(b["phases_ms"].get(name, 0) for b in self.batches) / 1000


def run_variant(
    settings: Settings, name: str, env: dict[str, str], args: argparse.Namespace, work: Path
) -> VariantRun:
    partitions = 4
    raw = private_topic(settings, "raw", partitions)
    job_args, outputs = spark_job_args(settings, raw, work / f"checkpoint-{name}", [])
    feed = LiveFeed(settings, raw, partitions, args.rate, args.things)
    reader = JoinedLatency(settings, outputs["joined"])
    launched = time.time()
    job = ServiceProcess(MODULE, job_args, work / f"{name}.log", env).start()
    assert job.process is not None
    feed.start()
    reader.start()
    try:
        with GroupSampler(job.process.pid, role_of(MODULE)) as sampler:
            deadline = time.monotonic() + 300
            while not batch_progress(job.logged_since_start()):
                if not job.alive() or time.monotonic() > deadline:
                    raise SystemExit(f"{name}: no batch with input, see {job.log}")
                time.sleep(1)
            status(
                f"{name}: first batch done, warming up {args.warmup_s:.0f} s, then measuring "
                f"{args.measure_s:.0f} s"
            )
            start = time.time() + args.warmup_s
            time.sleep(args.warmup_s + args.measure_s)
            end = time.time()
            feed.stop.set()
            status(
                f"{name}: feed stopped, measuring the idle job's CPU over {args.idle_s:.0f} s "
                "after 10 s"
            )
            time.sleep(10 + args.idle_s)
            sampler.sample()
            cpu = sampler.cpu_between(start, end)
            idle_cpu = sampler.cpu_between(end + 10, end + 10 + args.idle_s) / args.idle_s
    finally:
        job.terminate(120)
        feed.stop.set()
        reader.stop.set()
    feed.join(30)
    reader.join(30)
    logged = job.logged_since_start()
    progress = batch_progress(logged)
    batches = [b for b in progress if start <= log_time(b["ts"]) <= end]
    latencies = [latency for at, latency in reader.samples if start <= at <= end]
    events = [json.loads(line) for line in logged.splitlines() if line.startswith("{")]
    running = next(e for e in events if e.get("msg") == "query running")
    commits = [
        e for e in events if e.get("msg") == "batch committed" and start <= log_time(e["ts"]) <= end
    ]
    return VariantRun(
        name,
        batches,
        sum(b["input_rows"] for b in batches),
        cpu,
        end - start,
        latencies,
        log_time(running["ts"]) - launched,
        log_time(progress[0]["ts"]) - launched,
        progress[0]["phases_ms"],
        commits,
        idle_cpu,
    )


def report(runs: list[VariantRun]) -> None:
    base = runs[0]
    print(
        "\n| variant | batches | records/batch | batch p50 / p90 s | "
        + " | ".join(PHASES)
        + " (median s) | CPU µs/record | CPU s/s | idle CPU s/s | joined at topic p50 / p99 s | "
        "p99 vs first |"
    )
    print("|---" * (10 + len(PHASES) - 1) + "|")
    for run in runs:
        per_record = run.cpu_s / max(1, run.records) * 1e6
        p99 = quantile(run.latencies, 0.99)
        print(
            f"| {run.name} | {len(run.batches)} | {run.records / max(1, len(run.batches)):,.0f} | "
            f"{run.duration(0.5):.2f} / {run.duration(0.9):.2f} | "
            + " | ".join(f"{run.phase(p):.3f}" for p in PHASES)
            + f" | {per_record:.1f} | {run.cpu_s / run.window_s:.2f} | {run.idle_cpu:.2f} | "
            f"{quantile(run.latencies, 0.5):.2f} / {p99:.2f} | "
            f"{p99 / quantile(base.latencies, 0.99):.2f}x |"
        )


def report_inside(runs: list[VariantRun]) -> None:
    print(
        "\n| variant | sink: "
        + " | ".join(SINK_PHASES)
        + " | state: "
        + " | ".join(STATE_TIMES)
        + " (median s) |"
    )
    print("|---" * (1 + len(SINK_PHASES) + len(STATE_TIMES)) + "|")
    for run in runs:
        print(
            f"| {run.name} | "
            + " | ".join(f"{run.sink_phase(p):.3f}" for p in SINK_PHASES)
            + " | "
            + " | ".join(f"{run.state_time(p):.3f}" for p in STATE_TIMES)
            + " |"
        )


def report_start(runs: list[VariantRun]) -> None:
    print(
        "\n| variant | process start -> query running s | -> first batch committed s | first "
        "batch: " + " | ".join(PHASES) + " (s) |"
    )
    print("|---" * (3 + len(PHASES)) + "|")
    for run in runs:
        print(
            f"| {run.name} | {run.running_s:.1f} | {run.first_batch_s:.1f} | "
            + " | ".join(f"{run.first_phases.get(p, 0) / 1000:.2f}" for p in PHASES)
            + " |"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rate", type=float, default=1000, help="rows/s (each ~4 raw records)")
    parser.add_argument("--things", type=int, default=100)
    parser.add_argument("--warmup-s", type=float, default=45)
    parser.add_argument("--measure-s", type=float, default=60)
    parser.add_argument(
        "--idle-s", type=float, default=20, help="CPU of the idle job, after the feed stops"
    )
    parser.add_argument("--variants", default=",".join(VARIANTS))
    args = parser.parse_args(argv)
    unknown = [v for v in args.variants.split(",") if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown}: one of {', '.join(VARIANTS)}")
    floor = inherent_waits(args.rate, args.things, int(args.rate * 120))
    print(
        f"the data's own wait (pair certain - its event time) at {args.rate:,.0f} rows/s over "
        f"{args.things} things: p50 {quantile(floor, 0.5):.2f} s, "
        f"p99 {quantile(floor, 0.99):.2f} s",
        flush=True,
    )
    settings = Stack(Settings.from_sources()).up()
    with tempfile.TemporaryDirectory(prefix="bench-batches-") as tmp:
        runs = []
        for name in args.variants.split(","):
            status(f"variant {name}: {args.rate:,.0f} rows/s over {args.things} things")
            runs.append(run_variant(settings, name, VARIANTS[name], args, Path(tmp)))
        report(runs)
        report_inside(runs)
        report_start(runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
