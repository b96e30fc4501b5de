"""Benchmark: Kafka -> db_connector -> InfluxDB on this machine (a script, not a test).

    .venv/bin/python benchmarks/bench_connector.py [--records 1000000] [--baseline-records 100000]
        [--batch-points 5000,20000,50000] [--flush-interval-ms 250] [--profile DIR] [--keep]

Starts (or reuses) the local stack and fills a private raw topic (4 partitions) with realistic
Avro measurements: rows made like `simulator.generate` does, split by the bridge's own
RowSplitter, so every record is a distinct point. Not timed. Then, per --batch-points value,
runs the real connector (`python -m db_connector`) on that topic into a fresh private database
and polls its /metrics until every point is written. Reported: points/s from the first written
point to the last (start-up and group join excluded), mean batch latency (connector_batch_seconds),
CPU seconds of the connector and of influxd over that window, and a count query proving
InfluxDB holds exactly N points. The baseline is a naive loader in this process on the first
--baseline-records records: per-record poll and fastavro decode, influxdb-client Point objects,
a synchronous write of each 1,000 points and a synchronous offset commit after each write.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.support.connector_probes import (
    count_points,
    cpu_seconds,
    influxd_pid,
    runqueue_seconds,
    scrape,
)
from benchmarks.support.naive_loader import measure_naive_baseline
from db_connector.config import ConnectorSettings
from mqtt_bridge.records import RowSplitter
from simulator.generate import generate
from stacktools.harness.services import service_process
from stacktools.harness.wiring import Wiring, private_database, private_topic
from stacktools.stack import Stack
from stacktools.stack.influx import InfluxClient
from stacktools.stack.settings import Settings
from streamkit.deadline import Deadline, TimedOut
from streamkit.durations import duration_ms
from streamkit.events import validate
from streamkit.kafka_clients import admin_client, idempotent_producer
from streamkit.paths import REPO_ROOT

if TYPE_CHECKING:
    from stacktools.harness.processes import ServiceProcess

PARTITIONS = 4


# ----------------------------------------------------------------------------- preparation
def feed(settings: Settings, topic: str, records: int) -> int:
    """Generated rows -> the bridge's records (key, Avro value, partition by thing), exactly
    `records` of them (the last row may be cut short)."""
    splitter = RowSplitter(PARTITIONS)
    producer = idempotent_producer(
        settings, "bench-connector-feed", **{"queue.buffering.max.messages": 2_000_000}
    )
    count = 0
    started = last_print = time.perf_counter()
    for obj in generate(records, 8, seed=7):  # more rows than needed: rows hold ~4 quantities
        for record in splitter.split(validate(obj)):
            producer.produce(topic, record.value, record.key, partition=record.partition)
            count += 1
            if count == records:
                break
        producer.poll(0)
        now = time.perf_counter()
        if now - last_print > 5:
            print(
                f"  ... {count:,}/{records:,} records produced after {now - started:.0f} s",
                flush=True,
            )
            last_print = now
        if count == records:
            break
    remaining = producer.flush(300)
    if remaining:
        raise SystemExit(f"{remaining} records not delivered to {topic}")
    print(f"  {count:,} records in {topic} after {time.perf_counter() - started:.0f} s", flush=True)
    return count


# ----------------------------------------------------------------------------- measured run
#: One observation of the run: (time, points, connector CPU s, influxd CPU s, connector
#: run-queue wait s) ...
Sample = tuple[float, float, float | None, float | None, float | None]
#: ... and at the first point also the batches' count.
FirstSample = tuple[float, float, float | None, float | None, float | None, float]


def measure_connector(
    settings: Settings,
    topic: str,
    dlq: str,
    records: int,
    batch_points: int | None,
    flush_ms: int | None,
    work: Path,
    profile: Path | None,
    databases: list[str],
) -> dict:
    """The real connector loading ``records`` into a fresh database, timed from its first
    point to its last (its start-up is not its throughput): the run's row of the table."""
    database = private_database(settings)
    databases.append(database)
    service, log = connector_service(topic, dlq, database, batch_points, flush_ms, work)
    port = int(service.args[service.args.index("--metrics-port") + 1])
    influx_pid = influxd_pid(settings)
    launched = time.perf_counter()
    service.start()
    spy = None
    try:
        service.wait_logged('"connector running"', 120)
        if profile is not None:
            spy = start_pyspy(profile, batch_points, service.popen.pid)
        first, end, metrics = watch_until_loaded(service, log, port, influx_pid, records, launched)
    finally:
        if spy is not None:
            stop_pyspy(spy)
        if service.alive():
            service.terminate()
    if influxd_pid(settings) != influx_pid:
        print(
            "  WARNING: influxd was restarted during this run (someone else's test?): its numbers "
            "are not valid",
            flush=True,
        )
    return connector_result(
        first, end, metrics, launched, records, batch_points, flush_ms, settings, database
    )


def connector_service(
    topic: str, dlq: str, database: str, batch_points: int | None, flush_ms: int | None, work: Path
) -> tuple[ServiceProcess, Path]:
    """The real connector on its own consumer group, so every run reads the topic from the
    start; its settings from the command line only where the run varies them."""
    group = f"db-connector-bench-{uuid.uuid4().hex[:8]}"
    extra: list[str] = []
    if batch_points:
        extra += ["--batch-points", str(batch_points)]
    if flush_ms:
        extra += ["--flush-interval", f"{flush_ms}ms"]
    log = work / f"connector-{group}.log"
    service = service_process(
        "db_connector",
        Wiring.for_connector({"raw": topic, "dlq": dlq}, group, database),
        log,
        *extra,
    )
    return service, log


def start_pyspy(profile: Path, batch_points: int | None, pid: int) -> subprocess.Popen[bytes]:
    """py-spy on the running connector, so a run's profile shows where its CPU went."""
    profile.mkdir(parents=True, exist_ok=True)
    out = profile / f"connector-{batch_points or 'default'}.txt"
    return subprocess.Popen(
        [
            str(Path(sys.executable).parent / "py-spy"),
            "record",
            "--format",
            "raw",
            "--rate",
            "100",
            "--idle",
            "-o",
            str(out),
            "-p",
            str(pid),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def stop_pyspy(spy: subprocess.Popen[bytes]) -> None:
    """SIGINT makes py-spy write its profile; one that does not end is killed."""
    spy.send_signal(signal.SIGINT)
    try:
        spy.wait(60)
    except subprocess.TimeoutExpired:
        spy.kill()


def watch_until_loaded(
    service: ServiceProcess,
    log: Path,
    port: int,
    influx_pid: int | None,
    records: int,
    launched: float,
) -> tuple[FirstSample, Sample, dict[str, float]]:
    """Scrapes the connector until it wrote every record: the samples at the first and the last
    point (the rate counts between them, so start-up is left out) and the last scrape. Fails on
    an exit or 120 s without progress."""
    first: FirstSample | None = None
    last_print = time.perf_counter()
    stalled = Deadline(120)  # renewed on every progress
    previous = 0.0
    while True:
        if not service.alive():
            raise SystemExit(
                f"connector exited ({service.popen.returncode}): {log.read_text()[-2000:]}"
            )
        metrics = scrape(port)
        now = time.perf_counter()
        if metrics["points"] > 0 and first is None:
            first = (*sample(now, metrics, service, influx_pid), metrics["batch_count"])
        if metrics["points"] != previous:
            previous, stalled = metrics["points"], Deadline(120)
        if metrics["points"] >= records:
            assert first is not None  # set at the first point, before the last one ends the loop
            return first, sample(now, metrics, service, influx_pid), metrics
        if now - last_print > 5:
            rate = (
                (metrics["points"] - first[1]) / (now - first[0]) if first and now > first[0] else 0
            )
            print(
                f"  ... {metrics['points']:,.0f}/{records:,} points written after "
                f"{now - launched:.0f} s ({rate:,.0f} points/s)",
                flush=True,
            )
            last_print = now
        if stalled.expired():
            raise TimedOut(f"no progress for 120 s at {metrics['points']:,.0f} points; see {log}")
        time.sleep(0.05)


def sample(
    now: float, metrics: dict[str, float], service: ServiceProcess, influx_pid: int | None
) -> Sample:
    return (
        now,
        metrics["points"],
        cpu_seconds(service.popen.pid),
        cpu_seconds(influx_pid),
        runqueue_seconds(service.popen.pid),
    )


def difference(end: float | None, start: float | None) -> float | None:
    return end - start if end is not None and start is not None else None


def connector_result(
    first: FirstSample,
    end: Sample,
    metrics: dict[str, float],
    launched: float,
    records: int,
    batch_points: int | None,
    flush_ms: int | None,
    settings: Settings,
    database: str,
) -> dict:
    """The run's row of the table, from the first point to the last."""
    seconds = end[0] - first[0]
    points = end[1] - first[1]
    batches = metrics["batch_count"]
    return {
        "loader": "db_connector",
        "batch_points": batch_points,
        "flush_ms": flush_ms,
        "records": records,
        "seconds": seconds,
        "points_per_s": points / seconds,
        "from_launch_s": end[0] - launched,
        "batches": batches,
        "batch_ms": 1000 * metrics["batch_sum"] / batches if batches else 0.0,
        "cpu_s": difference(end[2], first[2]),
        "influx_cpu_s": difference(end[3], first[3]),
        "runqueue_s": difference(end[4], first[4]),
        "stored": count_points(settings, database),
        "database": database,
        "points_per_batch": metrics["points"] / batches if batches else 0.0,
    }


# ----------------------------------------------------------------------------- report
def fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def print_table(results: list[dict], baseline: dict | None, command: str) -> None:
    print()
    print(f"Command: `{command}`")
    print()
    print(
        "| loader | batch points | flush ms | points | seconds | points/s | vs baseline | "
        "points/batch | mean batch ms | loader CPU s | loader run-queue wait s | influxd CPU s | "
        "InfluxDB count |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in [*results, *([baseline] if baseline else [])]:
        check = "ok" if r["stored"] == r["records"] else "MISMATCH"
        ratio = f"{r['points_per_s'] / baseline['points_per_s']:.1f}x" if baseline else "n/a"
        print(
            f"| {r['loader']} | {r['batch_points']:,} | {fmt(r['flush_ms'], ',')} | "
            f"{r['records']:,} | {r['seconds']:.2f} | {r['points_per_s']:,.0f} | {ratio} | "
            f"{r['points_per_batch']:,.0f} | {fmt(r['batch_ms'], '.1f')} | "
            f"{fmt(r['cpu_s'], '.1f')} | {fmt(r['runqueue_s'], '.1f')} | "
            f"{fmt(r['influx_cpu_s'], '.1f')} | {r['stored']:,} {check} |"
        )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--records", type=int, default=1_000_000, help="records (= points) the connector loads"
    )
    parser.add_argument("--baseline-records", type=int, default=100_000)
    parser.add_argument(
        "--batch-points",
        default="",
        help="comma separated; one measured run each (default: the connector's own setting)",
    )
    parser.add_argument(
        "--flush-interval-ms", type=int, help="passed to the connector (default: its own setting)"
    )
    parser.add_argument(
        "--profile",
        type=Path,
        help="record a py-spy profile (raw format) of each run into this dir",
    )
    parser.add_argument("--no-baseline", action="store_true", help="skip the naive baseline")
    parser.add_argument(
        "--keep", action="store_true", help="keep the topics and databases (names are printed)"
    )
    args = parser.parse_args()
    if args.baseline_records > args.records:
        parser.error("--baseline-records must not exceed --records")
    return args


def connector_runs(
    args: argparse.Namespace,
    settings: Settings,
    defaults: ConnectorSettings,
    batch_sizes: list[int | None],
    topics: tuple[str, str],
    databases: list[str],
) -> list[dict]:
    """One measured run of the connector per batch size, each printed as it ends, the
    connector's own defaults named where the run left them."""
    topic, dlq = topics
    results: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="bench-connector-") as tmp:
        for batch in batch_sizes:
            print(
                f"connector: batch points {batch or defaults.batch_points:,}, flush interval "
                f"{args.flush_interval_ms or duration_ms(defaults.flush_interval)} ms ...",
                flush=True,
            )
            r = measure_connector(
                settings,
                topic,
                dlq,
                args.records,
                batch,
                args.flush_interval_ms,
                Path(tmp),
                args.profile,
                databases,
            )
            r["batch_points"] = batch or defaults.batch_points
            r["flush_ms"] = args.flush_interval_ms or duration_ms(defaults.flush_interval)
            results.append(r)
            stored = "ok" if r["stored"] == args.records else f"MISMATCH, expected {args.records:,}"
            print(
                f"  {r['points_per_s']:,.0f} points/s over {r['seconds']:.2f} s "
                f"({r['from_launch_s']:.1f} s from launch), {r['batches']:.0f} batches of "
                f"{r['batch_ms']:.1f} ms mean; InfluxDB holds {r['stored']:,} points: {stored}",
                flush=True,
            )
    return results


def baseline_run(
    args: argparse.Namespace, settings: Settings, topic: str, databases: list[str]
) -> dict:
    """The naive loader on the first --baseline-records of the same topic."""
    print(
        "baseline: naive loader (poll + fastavro + Point per record, write + commit per "
        f"1,000) on {args.baseline_records:,} records ...",
        flush=True,
    )
    baseline = measure_naive_baseline(settings, topic, args.baseline_records, databases)
    print(
        f"  {baseline['points_per_s']:,.0f} points/s; InfluxDB holds {baseline['stored']:,} points",
        flush=True,
    )
    return baseline


def clean_up(
    args: argparse.Namespace, settings: Settings, topics: list[str], databases: list[str]
) -> None:
    """Drops what the runs made, unless --keep asks to look at it (then names it)."""
    if args.keep:
        print(f"kept: topics {', '.join(topics)}; databases {', '.join(databases)}")
        return
    for database in databases:
        InfluxClient(settings).drop_database(database)
    admin = admin_client(settings)
    for future in admin.delete_topics(topics, operation_timeout=30).values():
        future.result(60)


def main() -> int:
    args = parse_args()
    settings = Stack(Settings.from_sources()).up()
    defaults = ConnectorSettings.from_sources()
    batch_sizes: list[int | None] = [int(b) for b in args.batch_points.split(",") if b.strip()]
    batch_sizes = batch_sizes or [None]  # None: the connector's default
    topic = private_topic(settings, "raw", PARTITIONS)
    dlq = private_topic(settings, "dlq", 1)
    databases: list[str] = []
    results: list[dict] = []
    try:
        print(
            f"feeding {args.records:,} records into {topic} ({PARTITIONS} partitions) ...",
            flush=True,
        )
        feed(settings, topic, args.records)
        results = connector_runs(args, settings, defaults, batch_sizes, (topic, dlq), databases)
        baseline = None if args.no_baseline else baseline_run(args, settings, topic, databases)
    finally:
        clean_up(args, settings, [topic, dlq], databases)
    python = (
        os.path.relpath(sys.executable, REPO_ROOT)
        if sys.executable.startswith(str(REPO_ROOT))
        else sys.executable
    )
    print_table(results, baseline, shlex.join([python, *sys.argv]))
    ok = all(r["stored"] == r["records"] for r in [*results, *([baseline] if baseline else [])])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
