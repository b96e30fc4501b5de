"""One ``--available-now`` run of our Spark join job (or a job with the same flags, e.g. a
single-pass job) over a raw topic, measured from its own per-batch progress log and /proc.

Rates are over the batches' processing time, so Spark's start-up (JVM, session, source) is
left out; "warm" also leaves out the first batch, which pays the Python workers' warm-up once
per start. CPU and peak RSS are the whole process group's (driver, JVM, Python workers) and, on
the launcher's Spark cluster, its workers' groups' (their executor JVMs and Python workers)."""

from __future__ import annotations

import dataclasses
import json
import statistics
import uuid
from collections.abc import Sequence
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path

from benchmarks.support.process_group import Classifier, GroupSampler
from stacktools.harness.processes import ServiceProcess
from stacktools.harness.wiring import private_topic
from stacktools.stack import Stack
from stacktools.stack.process import free_port
from stacktools.stack.servers.spark import spark_master_url
from stacktools.stack.settings import Settings
from streamkit.kafka_io import read_to_end

#: The pair every join benchmark joins (JOIN_PAIRS syntax).
PAIRS = "actSpeed_C11:vaTorque_C11:mechanical_power"
DEFAULT_JOB = "spark_jobs.join"


def role_of(module: str) -> Classifier:
    """RSS roles of a Spark job's process group: its JVM, its driver, its Python workers."""

    def classify(cmd: bytes) -> str:
        if cmd.split(b" ", 1)[0].endswith(b"java"):
            return "jvm"
        return "driver" if module.encode() in cmd else "python workers"

    return classify


def cluster_role(cmd: bytes) -> str:
    """RSS roles in a Spark worker's process group: the worker daemon, its executor JVM, its
    Python workers."""
    if b"deploy.worker.Worker" in cmd:
        return "worker daemon"
    if cmd.split(b" ", 1)[0].endswith(b"java"):
        return "executor JVM"
    return "executor Python"


def cluster_up(settings: Settings) -> tuple[str, list[int]]:
    """The launcher's Spark cluster (started if needed): its master URL and its workers' pids."""
    cluster = Stack(settings, ["spark"])
    cluster.up()
    workers = [s.pid for s in cluster.status() if s.name.startswith("spark-worker") and s.pid]
    return spark_master_url(settings), workers


def batch_progress(log_text: str) -> list[dict]:
    """The job's "batch progress" events of batches with input, in order."""
    events = [json.loads(line) for line in log_text.splitlines() if line.startswith("{")]
    return [e for e in events if e.get("msg") == "batch progress" and e.get("input_rows")]


def log_time(ts: str) -> float:
    """Wall time (epoch s) of a streamkit.logs ``ts`` (UTC, ms)."""
    return datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()


def batch_window(progress: list[dict]) -> tuple[float, float, float]:
    """Wall times (epoch s) of the first batch's start, its end and the last batch's end."""
    first_end, last_end = log_time(progress[0]["ts"]), log_time(progress[-1]["ts"])
    return first_end - progress[0]["duration_ms"] / 1000, first_end, last_end


@dataclasses.dataclass(frozen=True)
class JobRun:
    module: str
    batch: int
    progress: list[dict]  #: the job's "batch progress" events with input, in order
    cpu_s: float  #: group CPU from the first batch's start to the last one's end
    warm_cpu_s: float  #: the same from the first batch's end
    span_s: float  #: wall time from the first batch's start to the last one's end
    warm_span_s: float
    rss_mb: dict[str, float]  #: peak RSS per role
    rss_total_mb: float  #: peak RSS of the whole group at one instant
    joins: int  #: committed records in the joined topic
    #: peak RSS per role summed over the cluster's workers' groups (none on ``local[N]``)
    cluster_rss_mb: dict[str, float] = dataclasses.field(default_factory=dict)

    @property
    def input_records(self) -> int:
        return sum(e["input_rows"] for e in self.progress)

    @property
    def warm_records(self) -> int:
        return sum(e["input_rows"] for e in self.progress[1:])

    @property
    def processing_s(self) -> float:
        return sum(e["duration_ms"] for e in self.progress) / 1000

    @property
    def records_per_s(self) -> float:
        return self.input_records / self.processing_s

    @property
    def warm_records_per_s(self) -> float:
        warm = self.progress[1:] or self.progress
        return sum(e["input_rows"] for e in warm) / (sum(e["duration_ms"] for e in warm) / 1000)

    @property
    def joins_per_s(self) -> float:
        return self.joins / self.processing_s

    def batch_percentile_s(self, q: float) -> float:
        durations = sorted(e["duration_ms"] / 1000 for e in self.progress)
        return (
            statistics.median(durations)
            if q == 0.5
            else durations[min(len(durations) - 1, int(len(durations) * q))]
        )


def job_args(
    settings: Settings, raw: str, checkpoint: Path, extra: list[str]
) -> tuple[list[str], dict[str, str]]:
    """A job's command line over ``raw`` with private output topics, a fresh checkpoint, a
    query name and a free metrics port of its own, then ``extra``; and its output topics by
    role (joined, late, aggregates)."""
    outputs = {role: private_topic(settings, role, 4) for role in ("joined", "late", "aggregates")}
    args = [
        "--raw-topic",
        raw,
        "--joined-topic",
        outputs["joined"],
        "--late-topic",
        outputs["late"],
        "--aggregates-topic",
        outputs["aggregates"],
        "--marker-topic",
        private_topic(settings, "markers", 1, compact=True),
        "--checkpoint-dir",
        str(checkpoint),
        "--query-name",
        f"bench-{uuid.uuid4().hex[:6]}",
        "--pairs",
        PAIRS,
        "--metrics-port",
        str(free_port()),
        *extra,
    ]
    return args, outputs


def run_job(
    settings: Settings,
    raw: str,
    batch: int,
    work: Path,
    module: str = DEFAULT_JOB,
    extra_args: list[str] | None = None,
    workers: Sequence[int] = (),
) -> JobRun:
    """Run ``python -m <module> --available-now`` over ``raw`` with a fresh checkpoint and
    private output topics; fails when the job fails. ``workers``: the pids of the Spark workers
    the job runs on, whose groups' CPU counts as the job's."""
    log = work / f"{module.rsplit('.', 1)[-1]}-{batch}.log"
    args, outputs = job_args(
        settings,
        raw,
        work / f"checkpoint-{module}-{batch}",
        [
            "--max-offsets-per-trigger",
            str(batch),
            "--available-now",
            *(extra_args or []),
        ],
    )
    with ExitStack() as stack:
        cluster = [stack.enter_context(GroupSampler(pid, cluster_role)) for pid in workers]
        job = ServiceProcess(module, args, log).start()
        assert job.process is not None
        with GroupSampler(job.process.pid, role_of(module)) as sampler:
            sampler.wait(job.process)
    if job.process.returncode != 0:
        raise SystemExit(f"{module} failed, see {log}")
    progress = batch_progress(job.logged_since_start())
    if not progress:
        raise SystemExit(f"{module} logged no batch with input, see {log}")
    start, first_end, last_end = batch_window(progress)
    cluster_rss: dict[str, float] = {}
    for worker in cluster:
        for role, mb in worker.peak_mb.items():
            cluster_rss[role] = cluster_rss.get(role, 0.0) + mb
    samplers = [sampler, *cluster]
    return JobRun(
        module,
        batch,
        progress,
        sum(s.cpu_between(start, last_end) for s in samplers),
        sum(s.cpu_between(first_end, last_end) for s in samplers),
        last_end - start,
        last_end - first_end,
        sampler.peak_mb,
        sampler.peak_total_mb,
        # not end offsets: those count commit markers too
        len(read_to_end(settings, outputs["joined"])),
        cluster_rss,
    )
