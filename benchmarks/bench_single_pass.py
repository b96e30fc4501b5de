"""Benchmark: the single pass against the two jobs it replaces, on the same raw records (a script).

    .venv/bin/python benchmarks/bench_single_pass.py [--rows 200000] [--batch-sizes 20000,200000]

Feeds generated rows into a private raw topic as the bridge does, then for each batch size runs
(a) ``spark_jobs.join`` and ``spark_jobs.aggregate`` side by side, as the two-jobs pipeline runs
them, and (b) ``spark_jobs.single_pass``, each ``--available-now`` on fresh output topics.
Reported per run: wall time from the start to the exit, CPU seconds of the whole process groups
(JVMs and Python workers included, from /proc) per input record, in total and after every job's
first batch (the start-up paid once per process), peak RSS, and the ratios. The two shapes'
committed outputs (joined, aggregates and late topics) must be equal byte for byte, or the
script fails: the comparison is only fair if both did the same work.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from mqtt_bridge.records import RowSplitter
from simulator.generate import generate
from stacktools.cpu import group_cpu_seconds
from stacktools.processes import ServiceProcess, free_port
from stacktools.stack import Stack
from stacktools.wiring import private_topic
from streamkit.config import Settings
from streamkit.events import validate
from streamkit.kafka_clients import idempotent_producer
from streamkit.kafka_io import read_to_end

PAIRS = "actSpeed_C11:vaTorque_C11:mechanical_power"
WINDOWS = ["--tumbling", "10s", "--sliding", "off", "--session-gap", "off", "--allowed-lateness", "10s"]
FIRST_BATCH = '"msg": "batch committed"'


def feed(settings: Settings, raw: str, rows: int, partitions: int) -> int:
    """Generated rows -> the raw topic, encoded and partitioned as the bridge does."""
    splitter = RowSplitter(partitions)
    producer = idempotent_producer(settings, "bench-feed", **{"queue.buffering.max.messages": 2_000_000})
    count = 0
    for obj in generate(rows, 8, seed=3):
        for record in splitter.split(validate(obj)):
            producer.produce(raw, record.value, record.key, partition=record.partition)
            count += 1
        producer.poll(0)
    producer.flush(120)
    return count


@dataclass
class Run:
    shape: str
    batch: int
    wall_s: float
    cpu_s: float
    warm_cpu_s: float          #: CPU after every job logged its first committed batch
    warm_records: int          #: input records after that point (estimated from the batch log)
    rss_mb: float
    outputs: Counter


def group_rss_mb(pgid: int) -> float:
    """Resident memory of every process in the group (driver, JVM, Python workers)."""
    total = 0.0
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            if os.getpgid(int(status.parent.name)) != pgid:
                continue
            total += next(int(line.split()[1]) for line in status.read_text().splitlines()
                          if line.startswith("VmRSS:")) / 1024
        except (OSError, StopIteration, ValueError):
            continue
    return total


def input_after_first_batch(log: Path) -> int:
    """Input records of the batches after the first committed one (from the progress log)."""
    events = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    progress = [e.get("input_rows", 0) for e in events if e.get("msg") == "batch progress" and e.get("input_rows")]
    return sum(progress[1:])


def run_shape(settings: Settings, shape: str, raw: str, batch: int, work: Path) -> Run:
    outputs = {kind: private_topic(settings, kind, 4) for kind in ("joined", "aggregates", "late", "dlq")}
    common = ["--raw-topic", raw, "--late-topic", outputs["late"], "--dlq-topic", outputs["dlq"],
              "--max-offsets-per-trigger", str(batch), "--available-now"]

    def job(module: str, *args: str) -> ServiceProcess:
        tag = f"{module.rsplit('.', 1)[1]}-{uuid.uuid4().hex[:6]}"
        return ServiceProcess(module, [
            *common, *args, "--marker-topic", private_topic(settings, "markers", 1, compact=True),
            "--query-name", f"bench-{tag}", "--checkpoint-dir", str(work / tag),
            "--metrics-port", str(free_port())], work / f"{tag}.log")

    join_args, window_args = ["--joined-topic", outputs["joined"], "--pairs", PAIRS], ["--aggregates-topic",
                                                                                       outputs["aggregates"], *WINDOWS]
    jobs = ([job("spark_jobs.join", *join_args), job("spark_jobs.aggregate", *window_args)] if shape == "two-jobs"
            else [job("spark_jobs.single_pass", *join_args, *window_args)])
    started = time.monotonic()
    for j in jobs:
        j.start()
    cpu: dict[int, float] = {}
    warm_at: float | None = None
    rss = 0.0
    while any(j.process.poll() is None for j in jobs):
        for j in jobs:
            if j.process.poll() is None:
                cpu[j.process.pid] = max(cpu.get(j.process.pid, 0.0), group_cpu_seconds(j.process.pid))
        rss = max(rss, sum(group_rss_mb(j.process.pid) for j in jobs if j.process.poll() is None))
        if warm_at is None and all(FIRST_BATCH in j.log.read_text(errors="replace") for j in jobs):
            warm_at = sum(cpu.values())
        time.sleep(0.2)
    wall = time.monotonic() - started
    failed = [j.log for j in jobs if j.process.returncode != 0]
    if failed:
        raise SystemExit(f"{shape} failed, see {failed}")
    total = sum(cpu.values())
    produced = Counter((topic_kind, m.key(), m.value()) for topic_kind in ("joined", "aggregates", "late")
                       for m in read_to_end(settings, outputs[topic_kind]))
    return Run(shape, batch, wall, total, total - (warm_at or 0.0), sum(input_after_first_batch(j.log) for j in jobs)
               // len(jobs), rss, produced)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--batch-sizes", default="20000,200000")
    parser.add_argument("--partitions", type=int, default=4)
    args = parser.parse_args()
    settings = Stack(Settings.from_sources()).up()
    raw = private_topic(settings, "raw", args.partitions)
    print(f"feeding {args.rows:,} generated rows into {raw} ...", flush=True)
    records = feed(settings, raw, args.rows, args.partitions)
    print(f"{records:,} raw records", flush=True)
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="bench-single-pass-") as tmp:
        for batch in (int(b) for b in args.batch_sizes.split(",")):
            for shape in ("two-jobs", "single-pass"):
                print(f"{shape}, maxOffsetsPerTrigger={batch:,} ...", flush=True)
                runs.append(run_shape(settings, shape, raw, batch, Path(tmp)))
                r = runs[-1]
                print(f"  {r.wall_s:.1f} s, {r.cpu_s:.1f} CPU s, {len(r.outputs):,} output records", flush=True)
            two, one = runs[-2], runs[-1]
            if two.outputs != one.outputs:
                raise SystemExit(f"outputs differ at batch {batch}: only two jobs {sum((two.outputs - one.outputs).values())}"
                                 f", only single pass {sum((one.outputs - two.outputs).values())}")
    print("\nCommand: `python benchmarks/bench_single_pass.py " + " ".join(sys.argv[1:]) + "`\n")
    print(f"{records:,} raw records; outputs equal in every pair of runs.\n")
    print("| batch | shape | wall s | CPU s | CPU µs/record | CPU µs/record after the first batch | peak RSS MB |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for r in runs:
        warm = f"{r.warm_cpu_s / r.warm_records * 1e6:.1f}" if r.warm_records else "n/a"
        print(f"| {r.batch:,} | {r.shape} | {r.wall_s:.1f} | {r.cpu_s:.1f} | {r.cpu_s / records * 1e6:.1f} | {warm} "
              f"| {r.rss_mb:,.0f} |")
    print()
    for two, one in zip(runs[::2], runs[1::2]):
        print(f"batch {two.batch:,}: single pass / two jobs: wall {one.wall_s / two.wall_s:.2f}x, "
              f"CPU {one.cpu_s / two.cpu_s:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
