"""Benchmark: our Spark join job against a peer framework (Quix Streams) on the same raw
records, in one run (a script, not a test).

    .venv/bin/python benchmarks/bench_peers.py [--rows 400000] [--batch-sizes 50000,200000]
        [--ours spark_jobs.join] [--ours-args "..."] [--spark-cluster]

Generates rows and writes them to a private raw topic the way the bridge does
(benchmarks/support/raw_feed.py). Then:

- Quix Streams (pinned, in a venv of its own, created once: benchmarks/support/peer_venv.py) runs
  benchmarks/peers/quix_join.py, exactly-once, state per Thing, the closest join it expresses
  (the latest record of the other quantity per Thing), until it consumed every raw record;
  measured from its first consumed record to the end of its last commit.
- Our job (``--ours``, default the join; a job with the join's flags, e.g. a single-pass job,
  can stand in) runs ``--available-now`` once per batch size (benchmarks/support/spark_run.py),
  measured from its first batch's start to its last batch's end (Spark's start-up excluded,
  as Quix's connect and rebalance are), and also from the first batch's end ("warm").

For each: records/s over that window, CPU seconds per record and the cores really used over the
same window (the whole process group from /proc: driver, JVM, Python workers; Quix's one
process), peak RSS, and the output pairs committed. The per-core rate is records/s divided by
the cores used (= records per CPU second); the ratio ours/Quix of it says which does more per
core, independent of how many cores each managed to use on this shared machine.

With --spark-cluster ours runs on the launcher's standalone cluster with the executors' sink
(the scaled-out shape; KAFKA_BROKERS=3 for three Kafka nodes), its workers' process groups
(executor JVMs, their Python workers) counted with the job's.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from benchmarks.support.peer_venv import DEFAULT_ROOT, ensure_venv
from benchmarks.support.process_group import GroupSampler
from benchmarks.support.raw_feed import feed
from benchmarks.support.spark_run import DEFAULT_JOB, PAIRS, JobRun, cluster_up, run_job
from stacktools.harness.wiring import private_topic
from stacktools.stack import Stack
from stacktools.stack.settings import Settings
from streamkit.kafka_clients import uses_tls
from streamkit.kafka_io import read_to_end
from streamkit.wire.resources import schema_dir

QUIX = ("quixstreams", "3.28.1", "avro")  # distribution, version, extras (fastavro)
QUIX_APP = Path(__file__).resolve().parent / "peers" / "quix_join.py"


@dataclasses.dataclass(frozen=True)
class Measured:
    """One row of the table: a run over one window."""

    name: str
    records: int
    wall_s: float
    cpu_s: float
    rss_mb: float
    pairs: int

    @property
    def records_per_s(self) -> float:
        return self.records / self.wall_s

    @property
    def cores(self) -> float:
        return self.cpu_s / self.wall_s

    @property
    def per_core(self) -> float:
        """records/s per core used = records per CPU second."""
        return self.records_per_s / self.cores


def run_quix(settings: Settings, python: Path, raw: str, records: int, work: Path) -> Measured:
    """The Quix app over the raw topic, isolated (-I: no PYTHONPATH, no script directory on the
    path, so nothing of the project can be imported); fails unless it consumed every record."""
    output = private_topic(settings, "joined", 4)
    log = work / "quix.log"
    args = [
        str(python),
        "-I",
        str(QUIX_APP),
        "--bootstrap",
        settings.bootstrap_servers,
        "--username",
        settings.kafka_username,
        "--security-protocol",
        settings.kafka_protocol,
        "--input-topic",
        raw,
        "--output-topic",
        output,
        "--consumer-group",
        f"quix-bench-{uuid.uuid4().hex[:8]}",
        "--state-dir",
        str(work / "quix-state"),
        "--schema-dir",
        str(schema_dir()),
        "--pair",
        PAIRS,
        "--expected-records",
        str(records),
    ]
    if uses_tls(settings):  # the stack's CA; librdkafka verifies the host name by default
        args += ["--ssl-ca-location", str(settings.ca_path)]
    env = {**os.environ, "QUIX_KAFKA_PASSWORD": settings.kafka_password.reveal()}
    with log.open("wb") as handle:
        process = subprocess.Popen(
            args, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True, env=env
        )
    with GroupSampler(process.pid) as sampler:
        code = sampler.wait(process)
    events = {
        e["event"]: e
        for e in (
            json.loads(line) for line in log.read_text().splitlines() if line.startswith('{"event"')
        )
    }
    if code != 0 or "done" not in events or "first_record" not in events:
        raise SystemExit(f"the Quix app failed (exit {code}), see {log}")
    done, first = events["done"], events["first_record"]["time"]
    committed = len(read_to_end(settings, output))
    if committed != done["pairs"]:
        print(
            f"  warning: Quix reported {done['pairs']:,} pairs but {committed:,} are committed",
            flush=True,
        )
    print(
        f"  Quix: {done['consumed']:,} consumed, {done['pairs']:,} pairs, {done['late']:,} late",
        flush=True,
    )
    return Measured(
        "Quix Streams 3.28.1",
        done["consumed"],
        done["time"] - first,
        sampler.cpu_between(first, done["time"]),
        sampler.peak_total_mb,
        committed,
    )


def our_rows(run: JobRun, where: str) -> list[Measured]:
    """Our run over all its batches, and from the first batch's end ("warm")."""
    name = f"ours{where}, batch {run.batch:,}"
    rss = run.rss_total_mb + sum(run.cluster_rss_mb.values())
    rows = [Measured(name, run.input_records, run.span_s, run.cpu_s, rss, run.joins)]
    if len(run.progress) > 1:
        rows.append(
            Measured(
                f"{name}, warm",
                run.warm_records,
                run.warm_span_s,
                run.warm_cpu_s,
                rss,
                run.joins,
            )
        )
    return rows


def print_table(quix: Measured, runs: list[Measured]) -> None:
    width = max(len(m.name) for m in [quix, *runs])
    header = (
        f"{'run':<{width}} {'records':>10} {'wall s':>7} {'records/s':>10} {'CPU s':>7} "
        f"{'CPU µs/rec':>10} {'cores':>5} {'peak RSS MB':>11} {'rec/s/core':>10} {'pairs out':>10} "
        f"{'per core vs Quix':>16}"
    )
    print(header)
    for m in [quix, *runs]:
        ratio = "" if m is quix else f"{m.per_core / quix.per_core:.2f}x"
        print(
            f"{m.name:<{width}} {m.records:>10,} {m.wall_s:>7.1f} {m.records_per_s:>10,.0f} "
            f"{m.cpu_s:>7.1f} {m.cpu_s / m.records * 1e6:>10.1f} {m.cores:>5.2f} "
            f"{m.rss_mb:>11,.0f} {m.per_core:>10,.0f} {m.pairs:>10,} {ratio:>16}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--rows", type=int, default=400_000, help="generated rows (each becomes ~4 raw records)"
    )
    parser.add_argument(
        "--batch-sizes", default="50000,200000", help="our job's maxOffsetsPerTrigger, one run each"
    )
    parser.add_argument(
        "--ours", default=DEFAULT_JOB, help="our job's module (the join's flags, --available-now)"
    )
    parser.add_argument(
        "--ours-args", default="", help="more flags for our job, e.g. a single pass's window flags"
    )
    parser.add_argument(
        "--spark-cluster",
        action="store_true",
        help="ours on the launcher's Spark cluster (started if needed), the executors' sink",
    )
    parser.add_argument(
        "--quix-venv",
        type=Path,
        default=DEFAULT_ROOT / "quix-venv",
        help="Quix Streams' own venv (created with pip on first use)",
    )
    parser.add_argument(
        "--work-dir", type=Path, help="keep logs, state and checkpoints here (default: a temp dir)"
    )
    args = parser.parse_args()
    python = ensure_venv(args.quix_venv, *QUIX)
    settings = Stack(Settings.from_sources()).up()
    ours_args, where = shlex.split(args.ours_args), ""
    workers: list[int] = []
    if args.spark_cluster:
        master, workers = cluster_up(settings)
        ours_args += ["--spark-master", master, "--sink", "executors"]
        where = " on the cluster"
    raw = private_topic(settings, "raw", 4)
    print(f"feeding {args.rows:,} generated rows into {raw} ...", flush=True)
    records, _ = feed(settings, raw, args.rows)
    print(f"{records:,} raw records", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-peers-") as tmp:
        work = args.work_dir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        print("Quix Streams app (exactly-once) ...", flush=True)
        quix = run_quix(settings, python, raw, records, work)
        runs: list[Measured] = []
        for batch in (int(b) for b in args.batch_sizes.split(",")):
            print(f"{args.ours} --available-now, maxOffsetsPerTrigger={batch:,} ...", flush=True)
            run = run_job(settings, raw, batch, work, args.ours, ours_args, workers)
            if run.input_records != records:
                raise SystemExit(f"{args.ours} read {run.input_records:,} of {records:,} records")
            runs += our_rows(run, where)
    print(
        f"\nours: {args.ours} {shlex.join(ours_args)}".rstrip()
        + f"; {records:,} raw records of {args.rows:,} rows\n"
    )
    print_table(quix, runs)
    print()
    for m in runs:
        print(
            f"per-core rate ours/Quix, {m.name}: {m.per_core:,.0f} / {quix.per_core:,.0f} "
            f"records/s per core = {m.per_core / quix.per_core:.2f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
