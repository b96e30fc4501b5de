"""Verdict: Spark runs on local[2] here; the cluster pays off only with cores it adds.

Benchmark: the join job on ``local[2]`` against the launcher's two-worker Spark cluster, and
what every process of each costs in memory (a script, not a test).

    .venv/bin/python benchmarks/experiments/bench_cluster.py [--rows 100000] [--batch 50000]
        [--sinks driver,executors]

Feeds generated rows into a private raw topic as the bridge does, then runs
``python -m spark_jobs.join --available-now`` (fresh checkpoint, private outputs) once on
``local[2]`` and once per sink on the cluster (``up spark``: a master and two one-core
workers, started if needed). Reports input records/s over the batches' processing time (after
the first batch: warm), the CPU per record of every process involved (the job's group and, on
the cluster, each worker's group: its executor JVM and Python workers, which are the worker's
children, not the job's), and the peak RSS of each kind of process. Both runs have the same two
cores, so the ratio shows what the cluster's executors, their RPC and the remote sink cost.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from benchmarks.support.process_group import rss_mb
from benchmarks.support.raw_feed import feed
from benchmarks.support.spark_run import PAIRS, JobRun, cluster_up, run_job
from spark_jobs.config import JoinSettings
from spark_jobs.join import join_plan
from stacktools.harness.wiring import private_topic
from stacktools.stack import Stack
from stacktools.stack.settings import Settings

#: The job's own process group (benchmarks.support.spark_run.role_of) under the names used here.
JOB_ROLES = {
    "driver": "driver Python",
    "jvm": "driver JVM",
    "python workers": "driver's Python workers",
}


def run_on(
    settings: Settings, raw: str, batch: int, work: Path, master: str, sink: str, workers: list[int]
) -> JobRun:
    """One job run on ``master``; with ``workers`` (their pids) their groups counted too."""
    directory = work / f"{master.split(':')[0]}-{sink}"
    directory.mkdir(parents=True)
    extra = ["--spark-master", master, "--sink", sink]
    return run_job(settings, raw, batch, directory, extra_args=extra, workers=workers)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=50_000, help="maxOffsetsPerTrigger")
    parser.add_argument("--sinks", default="driver,executors", help="sinks to run on the cluster")
    args = parser.parse_args()
    settings = Stack(Settings.from_sources()).up()
    master, workers = cluster_up(settings)
    raw = private_topic(settings, "raw", 4)
    print(f"feeding {args.rows:,} generated rows into {raw} ...", flush=True)
    plan = join_plan(JoinSettings.from_sources(cli={"pairs": PAIRS}))
    wanted = frozenset(plan.config(()).quantities)
    records, _ = feed(settings, raw, args.rows, wanted)
    rows: list[tuple[str, JobRun]] = []
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
        work = Path(tmp)
        print("join on local[2] ...", flush=True)
        rows.append(
            (
                "local[2], driver sink",
                run_on(settings, raw, args.batch, work, "local[2]", "driver", []),
            )
        )
        for sink in args.sinks.split(","):
            print(f"join on the cluster ({len(workers)} workers), {sink} sink ...", flush=True)
            run = run_on(settings, raw, args.batch, work, master, sink, workers)
            rows.append((f"cluster, {sink} sink", run))
    base = rows[0][1].warm_records_per_s
    print(f"\n{records:,} raw records, batches of {args.batch:,}; 2 cores either way")
    print(
        f"{'run':<26} {'records/s':>10} {'warm rec/s':>10} {'vs local':>8} {'CPU us/rec':>10}  "
        "peak RSS MB"
    )
    for name, run in rows:
        cpu_us = run.cpu_s / run.input_records * 1e6
        memory = {
            **{JOB_ROLES.get(role, role): mb for role, mb in run.rss_mb.items()},
            **run.cluster_rss_mb,
        }
        print(
            f"{name:<26} {run.records_per_s:>10,.0f} {run.warm_records_per_s:>10,.0f} "
            f"{run.warm_records_per_s / base:>7.2f}x {cpu_us:>10.1f}  "
            + ", ".join(f"{role} {mb:,.0f}" for role, mb in sorted(memory.items()))
        )
    (master_pid,) = [s.pid for s in Stack(settings, ["spark"]).status() if s.name == "spark-master"]
    if master_pid:
        print(
            f"spark master daemon: {sum(rss_mb([master_pid], lambda _: 'master').values()):,.0f} MB"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
