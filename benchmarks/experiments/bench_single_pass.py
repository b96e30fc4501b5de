"""Verdict: the single pass, with one shuffle partition, is the pipeline's default shape.

Benchmark: the single pass against the two jobs it replaces, on the same raw records (a script).

    .venv/bin/python benchmarks/experiments/bench_single_pass.py [--rows 200000]
        [--batch-sizes 20000,200000]

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
import sys
import tempfile
import time
import uuid
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from benchmarks.support.process_group import GroupSampler
from benchmarks.support.raw_feed import feed
from benchmarks.support.spark_run import PAIRS, batch_progress, log_time, role_of
from stacktools.harness.processes import ServiceProcess
from stacktools.harness.wiring import private_topic
from stacktools.stack import Stack
from stacktools.stack.process import free_port
from stacktools.stack.settings import Settings
from streamkit.kafka_io import read_to_end

WINDOWS = [
    "--tumbling",
    "10s",
    "--sliding",
    "off",
    "--session-gap",
    "off",
    "--allowed-lateness",
    "10s",
]


@dataclass
class Run:
    shape: str
    batch: int
    wall_s: float  #: from the start to the last exit
    cpu_s: float  #: every job's whole process group, start-up included
    batches_cpu_s: float  #: each job's group from its first batch's start to its last batch's end
    warm_cpu_s: float  #: the same from each job's first batch's end
    warm_records: int  #: input records of each job's batches after the first, summed over the jobs
    rss_mb: float  #: the jobs' peak RSS, summed
    outputs: Counter


def run_shape(settings: Settings, shape: str, raw: str, batch: int, work: Path) -> Run:
    outputs = {
        kind: private_topic(settings, kind, 4) for kind in ("joined", "aggregates", "late", "dlq")
    }
    common = [
        "--raw-topic",
        raw,
        "--late-topic",
        outputs["late"],
        "--dlq-topic",
        outputs["dlq"],
        "--max-offsets-per-trigger",
        str(batch),
        "--available-now",
    ]

    def job(module: str, *args: str) -> tuple[str, ServiceProcess]:
        tag = f"{module.rsplit('.', 1)[1]}-{uuid.uuid4().hex[:6]}"
        return module, ServiceProcess(
            module,
            [
                *common,
                *args,
                "--marker-topic",
                private_topic(settings, "markers", 1, compact=True),
                "--query-name",
                f"bench-{tag}",
                "--checkpoint-dir",
                str(work / tag),
                "--metrics-port",
                str(free_port()),
            ],
            work / f"{tag}.log",
        )

    join_args = ["--joined-topic", outputs["joined"], "--pairs", PAIRS]
    window_args = ["--aggregates-topic", outputs["aggregates"], *WINDOWS]
    jobs = (
        [job("spark_jobs.join", *join_args), job("spark_jobs.aggregate", *window_args)]
        if shape == "two-jobs"
        else [job("spark_jobs.single_pass", *join_args, *window_args)]
    )
    started = time.monotonic()
    with ExitStack() as stack:
        samplers = [
            stack.enter_context(GroupSampler(process.start().popen.pid, role_of(module)))
            for module, process in jobs
        ]
        for (_, process), sampler in zip(jobs, samplers, strict=True):
            sampler.wait(process.popen)
    wall = time.monotonic() - started
    failed = [process.log for _, process in jobs if process.popen.returncode != 0]
    if failed:
        raise SystemExit(f"{shape} failed, see {failed}")
    batches_cpu = warm_cpu = 0.0
    warm_records = 0
    for (_, process), sampler in zip(jobs, samplers, strict=True):
        progress = batch_progress(process.logged_since_start())
        first_end, last_end = log_time(progress[0]["ts"]), log_time(progress[-1]["ts"])
        batches_cpu += sampler.cpu_between(first_end - progress[0]["duration_ms"] / 1000, last_end)
        warm_cpu += sampler.cpu_between(first_end, last_end)
        warm_records += sum(e["input_rows"] for e in progress[1:])
    produced = Counter(
        (kind, m.key(), m.value())
        for kind in ("joined", "aggregates", "late")
        for m in read_to_end(settings, outputs[kind])
    )
    return Run(
        shape,
        batch,
        wall,
        sum(s.cpu[-1] for s in samplers),
        batches_cpu,
        warm_cpu,
        warm_records,
        sum(s.peak_total_mb for s in samplers),
        produced,
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--batch-sizes", default="20000,200000")
    parser.add_argument("--partitions", type=int, default=4)
    args = parser.parse_args()
    settings = Stack(Settings.from_sources()).up()
    raw = private_topic(settings, "raw", args.partitions)
    print(f"feeding {args.rows:,} generated rows into {raw} ...", flush=True)
    records, _ = feed(settings, raw, args.rows)
    print(f"{records:,} raw records", flush=True)
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="bench-single-pass-") as tmp:
        for batch in (int(b) for b in args.batch_sizes.split(",")):
            for shape in ("two-jobs", "single-pass"):
                print(f"{shape}, maxOffsetsPerTrigger={batch:,} ...", flush=True)
                runs.append(run_shape(settings, shape, raw, batch, Path(tmp)))
                r = runs[-1]
                print(
                    f"  {r.wall_s:.1f} s, {r.cpu_s:.1f} CPU s, {len(r.outputs):,} output records",
                    flush=True,
                )
            two, one = runs[-2], runs[-1]
            if two.outputs != one.outputs:
                raise SystemExit(
                    f"outputs differ at batch {batch}: only two jobs "
                    f"{sum((two.outputs - one.outputs).values())}, only single pass "
                    f"{sum((one.outputs - two.outputs).values())}"
                )
    print(
        "\nCommand: `python benchmarks/experiments/bench_single_pass.py "
        + " ".join(sys.argv[1:])
        + "`\n"
    )
    print(f"{records:,} raw records; outputs equal in every pair of runs.\n")
    print(
        "CPU per record: of the whole run (start-up included), of the batches, and of the batches "
        "after each job's first (per record each job read: the two jobs read every record twice, "
        "so their warm figure is per read; per raw record it is twice that).\n"
    )
    print(
        "| batch | shape | wall s | CPU s | CPU µs/raw record | batches µs/raw record | after "
        "first batch µs/read | peak RSS MB |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for r in runs:
        warm = f"{r.warm_cpu_s / r.warm_records * 1e6:.1f}" if r.warm_records else "n/a"
        print(
            f"| {r.batch:,} | {r.shape} | {r.wall_s:.1f} | {r.cpu_s:.1f} | "
            f"{r.cpu_s / records * 1e6:.1f} | {r.batches_cpu_s / records * 1e6:.1f} | {warm} | "
            f"{r.rss_mb:,.0f} |"
        )
    print()
    for two, one in zip(runs[::2], runs[1::2], strict=True):
        print(
            f"batch {two.batch:,}: single pass / two jobs: wall {one.wall_s / two.wall_s:.2f}x, "
            f"CPU {one.cpu_s / two.cpu_s:.2f}x, CPU of the batches "
            f"{one.batches_cpu_s / two.batches_cpu_s:.2f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
