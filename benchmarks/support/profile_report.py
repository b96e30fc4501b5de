"""The report of benchmarks/profile_batch.py, made from what its runs left in --out (runs.json,
the job's logs, Spark's event logs, py-spy's and JFR's samples): the tables, printed and written
to profile.md, and the plot."""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.support.profile_phases import (
    CONNECTOR_RULES,
    PYTHON_WORKER_RULES,
    Summary,
    assign_by_time,
    batch_phases,
    parse_event_log,
    phase_table,
    plot,
    read_pyspy,
    share_table,
    stage_work,
    summarize,
    work_table,
)
from benchmarks.support.profilers import jvm_samples
from benchmarks.support.quantile import quantile
from benchmarks.support.spark_run import batch_progress, log_time

POINT_LABELS = {"live": "live {rate:,.0f} rows/s", "catchup": "batches of {batch:,}"}


SINK_LABELS = {"driver": "local[2], driver sink", "executors": "cluster, executors' sink"}


def label(run: dict[str, Any], args: argparse.Namespace) -> str:
    point = POINT_LABELS[run["point"]].format(rate=args.rate, batch=args.batch)
    return f"{point}, {SINK_LABELS[run['sink']]}"


def summary_of(run: dict[str, Any], args: argparse.Namespace) -> tuple[Summary, int]:
    """The run's batches as a Summary; the warm-up batches (live: before the window; catch-up:
    the first --warmup-batches) apart. Also the records of the batches inside the CPU's window
    (catch-up: every batch after the first)."""
    logged = Path(run["log"]).read_text()
    progress = batch_progress(logged)
    events = [json.loads(line) for line in logged.splitlines() if line.startswith("{")]
    commits = {e["batch_id"]: e for e in events if e.get("msg") == "batch committed"}
    stages = parse_event_log(event_log_lines(Path(run["eventlog"])))
    # stages of jobs Spark did not tag with their batch: by time (the batch's trigger window)
    untagged = stages.pop(-1, [])
    windows = {
        b["batch_id"]: (log_time(b["ts"]) - b["duration_ms"] / 1000, log_time(b["ts"]))
        for b in progress
        if b["batch_id"] not in stages
    }
    for batch, found in assign_by_time(untagged, windows).items():
        stages[batch] = found
    start, end = run["window"]
    if run["point"] == "live":
        warm = [b for b in progress if log_time(b["ts"]) < start]
        steady = [b for b in progress if start <= log_time(b["ts"]) <= end]
    else:
        warm, steady = progress[: args.warmup_batches], progress[args.warmup_batches :]
    batches = warm + steady
    phases = [
        batch_phases(b, commits.get(b["batch_id"]), stages.get(b["batch_id"], [])) for b in batches
    ]
    work = [
        {
            **stage_work(stages.get(b["batch_id"], [])),
            **{f"state store: {k}": v / 1000 for k, v in (b.get("state_ms") or {}).items() if v},
        }
        for b in batches
    ]
    summary = summarize(phases, [b["input_rows"] for b in batches], len(warm), work)
    in_window = [b for b in progress if start <= log_time(b["ts"]) <= end]
    return summary, sum(b["input_rows"] for b in in_window)


def event_log_lines(directory: Path) -> Iterator[str]:
    """The lines of every event log under ``directory``, in order: Spark 4 writes a directory
    per application (``eventlog_v2_<app>``) of rolled files ``events_<N>_<app>``."""

    def order(path: Path) -> tuple[int, str]:
        number = path.name.split("_")[1] if path.name.startswith("events_") else ""
        return (int(number) if number.isdigit() else 0, str(path))

    files = [p for p in directory.rglob("*") if p.is_file() and not p.name.startswith("app")]
    for path in sorted(files, key=order):
        with path.open() as handle:
            yield from handle


def report(out: Path, args: argparse.Namespace) -> str:
    saved = json.loads((out / "runs.json").read_text())
    # the runs' own settings win over this invocation's
    args = argparse.Namespace(**{**vars(args), **saved.get("args", {})})
    lines = [
        f"Command: `{saved['command']}`",
        "",
        f"Load average (1, 5, 15 min) before: {saved['load']}; after: "
        f"{saved.get('load_after', 'n/a')}",
        "",
    ]
    spark = read_spark_runs(saved["spark"], args)
    lines += spark.lines(args.pyspy_rate)
    if saved.get("e2e"):
        lines += e2e_lines(saved["e2e"], out, args)
    plot(spark.summaries, out / "profile.png")
    lines.append(f"Plot: {out / 'profile.png'}")
    text = "\n".join(lines)
    (out / "profile.md").write_text(text + "\n")
    return text


@dataclass
class SparkProfiles:
    """What the single pass's runs left, per run label: read once, then laid out as tables
    side by side so the operating points and sinks compare at a glance."""

    summaries: dict[str, Summary] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    workers: dict[str, dict[str, int]] = field(default_factory=dict)
    jvm_threads: dict[str, dict[str, int]] = field(default_factory=dict)
    jvm_tasks: dict[str, dict[str, int]] = field(default_factory=lambda: defaultdict(dict))

    def lines(self, pyspy_rate: int) -> list[str]:
        return [
            "Wall time per batch by phase, median / p90 s over the steady batches:",
            "",
            phase_table(self.summaries),
            "",
            *self.notes,
            "",
            "Task time per batch (summed over tasks: both cores), median / p90 s:",
            "",
            work_table(self.summaries),
            "",
            f"Python workers' CPU by kind of code (py-spy, {pyspy_rate} Hz, from the end of "
            "the first batch to the end of the run):",
            "",
            share_table("Python workers", self.workers, pyspy_rate),
            "",
            "The JVMs' Java CPU samples (JFR, as py-spy's; shares, not seconds: JFR samples a "
            "few threads per period), by thread and, on the task threads, by kind of code:",
            "",
            share_table("JVM threads", self.jvm_threads, 1, shares_only=True),
            "",
            share_table("JVM task threads", self.jvm_tasks, 1, shares_only=True),
            "",
        ]


def read_spark_runs(runs: list[dict[str, Any]], args: argparse.Namespace) -> SparkProfiles:
    """Each run's batches, its warm-up and CPU note, its Python workers' and JVMs' samples."""
    profiles = SparkProfiles()
    for run in runs:
        name = label(run, args)
        summary, records = summary_of(run, args)
        profiles.summaries[name] = summary
        span = run["window"][1] - run["window"][0]
        cpu_us = run["cpu_s"] / max(1, records) * 1e6
        first = sum(summary.warmup[0].values()) if summary.warmup else float("nan")
        rest = quantile([sum(p.values()) for p in summary.warmup[1:]], 0.5)
        profiles.notes.append(
            f"- {name}: {len(summary.warmup)} warm-up batches (the first {first:.2f} s, the "
            f"others median {rest:.2f} s); CPU of the job's processes (with the cluster's "
            f"workers) {run['cpu_s'] / span:.2f} s/s, {cpu_us:.1f} µs per record"
        )
        profiles.workers[name] = read_pyspy(
            Path(run["log"]).parent.glob("pyspy-workers-*.txt"), PYTHON_WORKER_RULES
        )
        samples = jvm_samples(sorted(Path(run["log"]).parent.glob("jvm-*.jfr")))
        profiles.jvm_threads[name] = {}
        for (thread, category), count in samples.items():
            threads = profiles.jvm_threads[name]
            threads[thread] = threads.get(thread, 0) + count
            if thread == "task threads":
                profiles.jvm_tasks[name][category] = count
    return profiles


def e2e_lines(e2e: dict[str, Any], out: Path, args: argparse.Namespace) -> list[str]:
    """The whole pipeline's table: each step of a joined pair, the connector's histograms, and
    the connector's CPU by kind of code."""
    lines = [
        f"A joined pair, the whole pipeline live at {args.rate:,.0f} rows/s (driver sink, "
        "local[2]), s:",
        "",
        "| step | p50 | p90 | p99 | samples |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, (p50, p90, p99, n) in e2e["steps"].items():
        lines.append(f"| {name} | {p50:.3f} | {p90:.3f} | {p99:.3f} | {n:,} |")
    for name, (p50, p99) in e2e["connector"].items():
        fmt = "n/a" if p50 is None else f"{p50:.3f}"
        fmt99 = "n/a" if p99 is None else f"{p99:.3f}"
        lines.append(f"| {name} | {fmt} | – | {fmt99} | histogram |")
    connector = read_pyspy((out / "e2e").glob("pyspy-connector-*.txt"), CONNECTOR_RULES)
    return [
        *lines,
        "",
        share_table("connector CPU", {"live": connector}, args.pyspy_rate),
        "",
    ]
