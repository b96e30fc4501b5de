"""Where one micro-batch's time goes, start to commit, and then to InfluxDB (a script).

    .venv/bin/python benchmarks/profile_batch.py [--out DIR] [--points live,catchup]
        [--sinks driver,executors] [--rate 1000] [--batch 50000] [--no-e2e] [--report-only]

For each operating point (live: a feeder writes --rate generated rows/s into a private raw
topic, each stamped with the wall clock; catchup: --catchup-rows rows written first, then read
in batches of --batch records) and each sink (driver: the driver-side sink on ``local[2]``;
executors: the executors' sink on the launcher's Spark standalone cluster, ``up spark``), the
single pass runs alone with Spark's event log on, py-spy on its Python workers and JFR on its
JVMs. Per batch: Spark's phases (durationMs), the sink's timers, the stage walls and task
metrics of the batch's jobs (event log); over the run, the Python workers' CPU (py-spy) and the
JVMs' Java samples (JFR) by kind of code, which no timer splits. Then, unless --no-e2e,
the whole pipeline live at --rate (simulator, MQTT, bridge, the single pass, connector,
InfluxDB): the steps of a joined pair from its event to the InfluxDB ack, and the connector's
CPU by kind of code (py-spy).

Everything lands in --out (each run's logs, event log and profiles, runs.json); the tables are
printed and written to profile.md, the stacked bars to profile.png, next to them.
--report-only makes them again from --out without running anything.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from benchmarks.support.certainty import inherent_waits
from benchmarks.support.events import events_file, head
from benchmarks.support.live import LiveFeed, committed_tail
from benchmarks.support.process_group import GroupSampler
from benchmarks.support.profile_phases import waits_for_next
from benchmarks.support.profile_report import report
from benchmarks.support.profilers import Jfr, PySpy, jvms, python_daemons
from benchmarks.support.quantile import quantile
from benchmarks.support.raw_feed import feed
from benchmarks.support.spark_run import batch_progress, job_args, log_time, role_of
from benchmarks.support.timing import status
from stacktools.demo.histograms import histogram_between, percentile
from stacktools.harness.pipeline import Pipeline
from stacktools.harness.processes import ServiceProcess
from stacktools.harness.services import DEFAULT_SHAPE, SERVICES
from stacktools.harness.wiring import Wiring, private_topic
from stacktools.stack import Stack
from stacktools.stack.influx import InfluxClient
from stacktools.stack.servers.spark import spark_master_url
from stacktools.stack.settings import Settings
from streamkit.wire.avro import AvroCodec

MODULE = "spark_jobs.single_pass"
SPARK_STAGE = "spark_single_pass"


def spark_conf(event_dir: Path) -> str:
    """SPARK_CONF with Spark's event log on: uncompressed, so it is read as it is, and with the
    task metrics in each stage's totals."""
    own = os.environ.get("SPARK_CONF", "")
    log_conf = (
        f"spark.eventLog.enabled=true,spark.eventLog.dir={event_dir.as_uri()},"
        "spark.eventLog.compress=false,spark.eventLog.includeTaskMetricsAccumulators=true"
    )
    return f"{own},{log_conf}" if own else log_conf


def run_spark(
    settings: Settings,
    point: str,
    sink: str,
    args: argparse.Namespace,
    work: Path,
    workers: list[int],
) -> dict[str, Any]:
    """One run of the single pass alone; everything it leaves goes to ``work``."""
    work.mkdir(parents=True, exist_ok=True)
    events = work / "eventlog"
    events.mkdir(exist_ok=True)
    partitions = 4
    raw = private_topic(settings, "raw", partitions)
    extra = ["--sink", sink]
    if sink == "executors":
        extra += ["--spark-master", spark_master_url(settings)]
    records = 0
    if point == "catchup":
        status(f"{point}/{sink}: writing {args.catchup_rows:,} rows into {raw}")
        records, _ = feed(settings, raw, args.catchup_rows, things=args.things)
        extra += ["--max-offsets-per-trigger", str(args.batch)]
    command, _ = job_args(settings, raw, work / "checkpoint", extra)
    env = {"SPARK_CONF": spark_conf(events)}
    job = ServiceProcess(MODULE, command, work / "job.log", env).start()
    assert job.process is not None
    live = LiveFeed(settings, raw, partitions, args.rate, args.things)
    if point == "live":
        live.start()
    spy: PySpy | None = None
    jfr: Jfr | None = None
    window = (0.0, 0.0)
    try:
        with ExitStack() as stack:
            samplers = [
                stack.enter_context(GroupSampler(pid, role_of(MODULE)))
                for pid in [job.process.pid, *workers]
            ]
            wait_first_batch(job, f"{point}/{sink}")
            daemons = python_daemons([job.process.pid, *workers])
            status(f"{point}/{sink}: first batch done; py-spy on Python daemons {daemons}")
            spy = PySpy(daemons, work / "pyspy-workers.txt", args.pyspy_rate, subprocesses=True)
            jfr = Jfr(jvms([job.process.pid, *workers]), work / "jvm.jfr")
            if point == "live":
                start = time.time() + args.warmup_s
                time.sleep(args.warmup_s + args.measure_s)
                window = (start, time.time())
            else:
                window = backlog_window(job, records, f"{point}/{sink}")
            spy.stop()
            jfr.stop()
            for sampler in samplers:
                sampler.sample()
            cpu = sum(s.cpu_between(*window) for s in samplers)
    finally:
        live.stop.set()
        if spy is not None:
            spy.stop()
        if jfr is not None:
            jfr.stop()
        job.terminate(120)
    return {
        "point": point,
        "sink": sink,
        "window": window,
        "cpu_s": cpu,
        "daemons": daemons,
        "log": str(work / "job.log"),
        "eventlog": str(events),
    }


def wait_first_batch(job: ServiceProcess, name: str) -> None:
    """Until the job logged a batch with input: the profilers attach only then, so the JVM's
    and the workers' start-up stays out of the samples."""
    deadline = time.monotonic() + 300
    while not batch_progress(job.logged_since_start()):
        if not job.alive() or time.monotonic() > deadline:
            raise SystemExit(f"{name}: no batch with input, see {job.log}")
        time.sleep(0.5)


def backlog_window(job: ServiceProcess, records: int, name: str) -> tuple[float, float]:
    """Catch-up: the window from now until the job has read the whole backlog."""
    start = time.time()
    deadline = time.monotonic() + 900
    while sum(b["input_rows"] for b in batch_progress(job.logged_since_start())) < records:
        if not job.alive() or time.monotonic() > deadline:
            raise SystemExit(f"{name}: did not read its backlog, {job.log}")
        time.sleep(0.5)
    return (start, time.time())


class TopicTimes(threading.Thread):
    """Reads a topic as it grows (read_committed): (read at s, Kafka timestamp s, event time s)
    of every ``every``-th record."""

    def __init__(self, settings: Settings, topic: str, schema: str, every: int = 1) -> None:
        super().__init__(daemon=True)
        self.settings, self.topic, self.schema, self.every = settings, topic, schema, every
        self.stop = threading.Event()
        self.samples: list[tuple[float, float, float]] = []

    def run(self) -> None:
        codec = AvroCodec(self.schema)
        consumer = committed_tail(self.settings, "bench-profile-read", self.topic, "latest")
        seen = 0
        try:
            while not self.stop.is_set():
                for message in consumer.consume(10000, 0.05):
                    value = message.value()
                    if message.error() is not None or value is None:
                        continue
                    seen += 1
                    if seen % self.every:
                        continue
                    now = time.time()
                    event_s = codec.decode(value)["event_time_ms"] / 1000
                    self.samples.append((now, message.timestamp()[1] / 1000, event_s))
        finally:
            consumer.close()


def run_e2e(settings: Settings, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """The whole pipeline live: each step of a joined pair, and the connector's CPU."""
    wiring = Wiring.fresh(settings, "profile")
    pipeline = Pipeline(settings, wiring, work, shape=DEFAULT_SHAPE)
    rows = int(args.rate * (args.e2e_warmup_s + args.e2e_measure_s + 30))
    events = head(events_file(1_402_232, 100), rows, work)
    raw_reader = TopicTimes(settings, wiring.raw, "measurement", every=10)
    joined_reader = TopicTimes(settings, wiring.joined, "joined")
    spy: PySpy | None = None
    try:
        pipeline.start_stages()
        pipeline.wait_logged("mqtt_bridge", SERVICES["mqtt_bridge"].ready_line, 120)
        raw_reader.start()
        joined_reader.start()
        pipeline.replay(events, "--rate", str(args.rate), "--live", "--order", "file")
        time.sleep(args.e2e_warmup_s)
        connector = pipeline.services["db_connector"].process
        assert connector is not None
        spy = PySpy([connector.pid], work / "pyspy-connector.txt", args.pyspy_rate, False)
        before, start = pipeline.metrics("db_connector"), time.time()
        time.sleep(args.e2e_measure_s)
        after, end = pipeline.metrics("db_connector"), time.time()
        spy.stop()
        spark_log = pipeline.logged_since_start(SPARK_STAGE)
    finally:
        raw_reader.stop.set()
        joined_reader.stop.set()
        if spy is not None:
            spy.stop()
        pipeline.stop()
        InfluxClient(settings).drop_database(wiring.database)
    raw = [s for s in raw_reader.samples if start <= s[0] <= end]
    joined = [s for s in joined_reader.samples if start <= s[0] <= end]
    return {
        "window": (start, end),
        "steps": pair_steps(args.rate, spark_log, raw, joined, (start, end)),
        "connector": connector_latencies(before, after),
    }


def pair_steps(
    rate: float,
    spark_log: str,
    raw: list[tuple[float, float, float]],
    joined: list[tuple[float, float, float]],
    window: tuple[float, float],
) -> dict[str, tuple[float, float, float, int]]:
    """Each step of a joined pair's way, p50 / p90 / p99 and samples, from the readers' samples
    and Spark's log inside the window: which step to shorten first."""
    start, end = window
    progress = batch_progress(spark_log)
    events_logged = [json.loads(line) for line in spark_log.splitlines() if line.startswith("{")]
    commits = {
        e["batch_id"]: log_time(e["ts"])
        for e in events_logged
        if e.get("msg") == ("batch committed")
    }
    starts = sorted(log_time(b["ts"]) - b["duration_ms"] / 1000 for b in progress)
    in_window = [b for b in progress if start <= log_time(b["ts"]) <= end]
    steps = {
        "the data's own wait (pair certain - its event time; model of the feed)": inherent_waits(
            rate, 100, int(rate * 120)
        ),
        "event (simulator publish) -> raw record produced (MQTT, bridge)": [
            t - e for _, t, e in raw
        ],
        "raw record produced -> read by a reader (acks=all, fetch)": [r - t for r, t, _ in raw],
        "raw record read -> the next batch's start": waits_for_next([r for r, _, _ in raw], starts),
        "batch start -> committed (the batch)": [
            commits[b["batch_id"]] - (log_time(b["ts"]) - b["duration_ms"] / 1000)
            for b in in_window
            if b["batch_id"] in commits
        ],
        "joined produced -> read by a read_committed reader": [r - t for r, t, _ in joined],
        "pair's event time -> read in the joined topic": [r - e for r, _, e in joined],
    }
    return {
        name: (quantile(v, 0.5), quantile(v, 0.9), quantile(v, 0.99), len(v))
        for name, v in steps.items()
    }


def connector_latencies(
    before: dict[str, float], after: dict[str, float]
) -> dict[str, tuple[float | None, float | None]]:
    """The connector's own histograms over the window: what it adds after the joined topic."""

    def histogram(name: str, measurement: str = "") -> tuple[float | None, float | None]:
        labels = f'measurement="{measurement}"' if measurement else ""
        buckets = histogram_between(before, after, name, labels)
        return percentile(buckets, 0.5), percentile(buckets, 0.99)

    return {
        "joined: produced in Spark -> InfluxDB ack (ingest histogram)": histogram(
            "connector_ingest_latency_seconds", "joined"
        ),
        "connector batch: InfluxDB write + Kafka commit (batch histogram)": histogram(
            "connector_batch_seconds"
        ),
        "joined: event -> InfluxDB ack (event histogram)": histogram(
            "connector_event_latency_seconds", "joined"
        ),
        "raw: event -> InfluxDB ack (event histogram)": histogram(
            "connector_event_latency_seconds", "raw"
        ),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=Path("profile-output"))
    parser.add_argument("--points", default="live,catchup", help="live and/or catchup")
    parser.add_argument("--sinks", default="driver,executors", help="driver and/or executors")
    parser.add_argument("--rate", type=float, default=1000, help="live rows/s (~4 records each)")
    parser.add_argument("--things", type=int, default=100)
    parser.add_argument("--warmup-s", type=float, default=30)
    parser.add_argument("--measure-s", type=float, default=45)
    parser.add_argument("--batch", type=int, default=50_000, help="catch-up maxOffsetsPerTrigger")
    parser.add_argument("--catchup-rows", type=int, default=150_000)
    parser.add_argument("--warmup-batches", type=int, default=2, help="catch-up warm-up batches")
    parser.add_argument("--pyspy-rate", type=int, default=50, help="py-spy samples/s")
    parser.add_argument("--no-e2e", action="store_true", help="skip the whole-pipeline run")
    parser.add_argument("--e2e-warmup-s", type=float, default=45)
    parser.add_argument("--e2e-measure-s", type=float, default=60)
    parser.add_argument("--report-only", action="store_true", help="tables from --out only")
    args = parser.parse_args(argv)
    out: Path = args.out.resolve()
    if not args.report_only:
        out.mkdir(parents=True, exist_ok=True)
        saved: dict[str, Any] = {
            "command": " ".join(
                ["python", "benchmarks/profile_batch.py", *map(shlex.quote, sys.argv[1:])]
            ),
            "load": " ".join(Path("/proc/loadavg").read_text().split()[:3]),
            "args": {
                "rate": args.rate,
                "batch": args.batch,
                "pyspy_rate": args.pyspy_rate,
                "warmup_batches": args.warmup_batches,
            },
            "spark": [],
        }
        settings = Stack(Settings.from_sources()).up()
        sinks = [s for s in args.sinks.split(",") if s]
        workers: list[int] = []
        if "executors" in sinks:
            cluster = Stack(settings, ["spark"])
            cluster.up()
            workers = [
                s.pid for s in cluster.status() if s.name.startswith("spark-worker") and s.pid
            ]
        for point in [p for p in args.points.split(",") if p]:
            for sink in sinks:
                status(f"run: {point}, {sink} sink")
                run = run_spark(
                    settings,
                    point,
                    sink,
                    args,
                    out / f"{point}-{sink}",
                    workers if sink == "executors" else [],
                )
                saved["spark"].append(run)
                (out / "runs.json").write_text(json.dumps(saved, indent=1))
        if not args.no_e2e:
            status("run: the whole pipeline live")
            saved["e2e"] = run_e2e(settings, args, out / "e2e")
        saved["load_after"] = " ".join(Path("/proc/loadavg").read_text().split()[:3])
        (out / "runs.json").write_text(json.dumps(saved, indent=1))
    print(report(out, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
