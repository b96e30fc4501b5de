"""The pure half of the micro-batch profile (benchmarks/profile_batch.py): where one batch's
wall time goes, from what the run left behind, so it can be tested without Spark.

Three sources, each read after the run: the job's own log (Spark's ``durationMs`` per batch in
the listener's "batch progress" line, the sink's timers in "batch committed"), Spark's event log
(stage walls and task metrics per batch: what ran inside ``addBatch``) and py-spy's raw output
(the Python worker's and the connector's time by kind of code, which only a sampling profiler
can split). Phases of a batch are wall seconds that add up to its ``triggerExecution``.
"""

from __future__ import annotations

import bisect
import json
import statistics
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.support.quantile import quantile

#: Spark's phases outside addBatch, in the order a trigger runs them.
OUTSIDE = ("latestOffset", "getBatch", "queryPlanning", "walCommit", "commitOffsets")
#: Stage kinds of a batch's jobs (classify_stage), in plan order.
STAGE_KINDS = ("read", "stateful", "sink tasks", "other stage")
#: Labels of the wall phases, in the order of the stacked bars.
PHASE_LABELS = {
    "latestOffset": "latestOffset (Kafka end offsets)",
    "getBatch": "getBatch",
    "queryPlanning": "queryPlanning",
    "walCommit": "walCommit (offset log)",
    "read": "stage 1: Kafka fetch + Avro decode + shuffle write",
    "stateful": "stage 2: shuffle read + Arrow/pandas + state function + state store",
    "sink tasks": "stage 3: sink tasks (shuffle, produce, commit per partition)",
    "other stage": "other stages",
    "jobs other": "between stages (scheduling, result to driver, toArrow)",
    "produce": "sink: produce",
    "commit": "sink: transaction commit",
    "foreachBatch other": "foreachBatch other (py4j callback, open, planning the sink)",
    "commitOffsets": "commitOffsets (commit log)",
    "spark other": "Spark other (listener, progress, state maintenance)",
}
#: SQL metrics and task metrics (event log) summed per batch, as (name, unit in s).
WORK_METRICS: dict[str, tuple[str, float]] = {
    "executor run": ("internal.metrics.executorRunTime", 1e-3),
    "executor CPU": ("internal.metrics.executorCpuTime", 1e-9),
    "JVM GC": ("internal.metrics.jvmGCTime", 1e-3),
    "task deserialize": ("internal.metrics.executorDeserializeTime", 1e-3),
    "shuffle write": ("internal.metrics.shuffle.write.writeTime", 1e-9),
    "shuffle fetch wait": ("internal.metrics.shuffle.read.fetchWaitTime", 1e-3),
    "Python workers run": ("time to run Python workers", 1e-3),
    "Python workers start": ("time to start Python workers", 1e-3),
    "Python workers init": ("time to initialize Python workers", 1e-3),
    "state update": ("time to update", 1e-3),
    "state remove (timers)": ("time to remove", 1e-3),
    "state commit": ("time to commit changes", 1e-3),
}
_STATE_MARKERS = ("time to update", "number of total state rows", "time to commit changes")
_PYTHON_MARKERS = ("time to run Python workers", "data sent to Python workers")


# --------------------------------------------------------------------------- Spark's event log
@dataclass
class Stage:
    """One completed stage: its kind, wall seconds and summed metrics (by WORK_METRICS name)."""

    stage_id: int
    kind: str
    wall_s: float
    accumulables: dict[str, float] = field(default_factory=dict)  #: metric name -> raw value
    completed_s: float = 0.0  #: wall time (epoch s) the stage completed


def classify_stage(accumulables: Mapping[str, float]) -> str:
    """What a stage of a batch does, from the metrics its tasks updated: the stateful operator's
    stage, the executor sink's writer tasks (Python, no state), the Kafka scan (it only writes
    a shuffle), or another stage."""
    if any(name in accumulables for name in _STATE_MARKERS):
        return "stateful"
    if any(name in accumulables for name in _PYTHON_MARKERS):
        return "sink tasks"
    if "internal.metrics.shuffle.write.writeTime" in accumulables and not any(
        name.startswith("internal.metrics.shuffle.read.") for name in accumulables
    ):
        return "read"
    return "other stage"


def _number(value: object) -> float | None:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def parse_event_log(lines: Iterable[str]) -> dict[int, list[Stage]]:
    """Stages per streaming batch id from a Spark event log (one JSON event per line): a job's
    stages belong to the batch its ``streaming.sql.batchId`` property names; a stage's wall is
    submission -> completion, its metrics the totals Spark records in its Stage Info. Stages of
    jobs without that property are kept under batch -1 (assign_by_time places them)."""
    stage_batch: dict[int, int] = {}
    out: dict[int, list[Stage]] = {}
    for line in lines:
        if not line.startswith("{"):
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:  # the in-progress log's last line may be partial
            continue
        kind = event.get("Event")
        if kind == "SparkListenerJobStart":
            batch = (event.get("Properties") or {}).get("streaming.sql.batchId")
            for stage_id in event.get("Stage IDs", []):
                stage_batch[int(stage_id)] = -1 if batch is None else int(batch)
        elif kind == "SparkListenerStageCompleted":
            info = event.get("Stage Info", {})
            stage_id = int(info.get("Stage ID", -1))
            if stage_id not in stage_batch or "Completion Time" not in info:
                continue
            totals: dict[str, float] = {}
            for acc in info.get("Accumulables", []):
                value = _number(acc.get("Value"))
                if value is not None and acc.get("Name"):
                    totals[acc["Name"]] = totals.get(acc["Name"], 0.0) + value
            wall = info["Completion Time"] - info.get("Submission Time", info["Completion Time"])
            out.setdefault(stage_batch[stage_id], []).append(
                Stage(
                    stage_id,
                    classify_stage(totals),
                    wall / 1000,
                    totals,
                    info["Completion Time"] / 1000,
                )
            )
    return out


def assign_by_time(
    stages: Iterable[Stage], batches: Mapping[int, tuple[float, float]]
) -> dict[int, list[Stage]]:
    """Stages to the batch whose (start, end) wall window holds their completion; a stage in
    no window is left out."""
    out: dict[int, list[Stage]] = {}
    for stage in stages:
        for batch, (start, end) in batches.items():
            if start <= stage.completed_s <= end:
                out.setdefault(batch, []).append(stage)
                break
    return out


def stage_work(stages: Iterable[Stage]) -> dict[str, float]:
    """Task-side seconds of one batch (summed over its tasks, so over both cores), by
    WORK_METRICS name; the Kafka scan's run time on its own."""
    work: dict[str, float] = {}
    for stage in stages:
        for label, (name, unit) in WORK_METRICS.items():
            if name in stage.accumulables:
                work[label] = work.get(label, 0.0) + stage.accumulables[name] * unit
        if stage.kind == "read":
            run = stage.accumulables.get("internal.metrics.executorRunTime", 0.0) * 1e-3
            work["Kafka scan stage run"] = work.get("Kafka scan stage run", 0.0) + run
    return work


# --------------------------------------------------------------------------- one batch's wall
def batch_phases(
    progress: Mapping, commit: Mapping | None = None, stages: Sequence[Stage] = ()
) -> dict[str, float]:
    """Wall seconds of one batch by phase, adding up to its ``triggerExecution``.

    ``progress``: the listener's "batch progress" event (``phases_ms``: Spark's durationMs);
    ``commit``: the sink's "batch committed" event of the same batch (the driver-side sink's
    ``phases_s``: collect, produce, commit; the executor sink has none); ``stages``: the batch's
    stages from the event log, which split the jobs' part of addBatch (the driver-side sink's
    collect, or all of addBatch for the executor sink)."""
    ms = {k: float(v) for k, v in (progress.get("phases_ms") or {}).items()}
    total = ms.get("triggerExecution", float(progress.get("duration_ms", 0)))
    add_batch = ms.get("addBatch", 0.0) / 1000
    phases = {name: ms.get(name, 0.0) / 1000 for name in OUTSIDE}
    sink = (commit or {}).get("phases_s") or {}
    jobs = float(sink["collect"]) if "collect" in sink else add_batch
    for name in ("produce", "commit"):
        if name in sink:
            phases[name] = float(sink[name])
    by_kind: dict[str, float] = {}
    for stage in stages:
        by_kind[stage.kind] = by_kind.get(stage.kind, 0.0) + stage.wall_s
    # a stage's wall can exceed the collect's by the clock's granularity: scale, never overflow
    in_stages = sum(by_kind.values())
    scale = min(1.0, jobs / in_stages) if in_stages else 0.0
    for kind in STAGE_KINDS:
        if kind in by_kind:
            phases[kind] = by_kind[kind] * scale
    phases["jobs other"] = max(0.0, jobs - in_stages * scale)
    used_in_add = jobs + sum(float(sink.get(n, 0.0)) for n in ("produce", "commit"))
    phases["foreachBatch other"] = max(0.0, add_batch - used_in_add)
    phases["spark other"] = max(0.0, total / 1000 - add_batch - sum(phases[n] for n in OUTSIDE))
    return phases


@dataclass(frozen=True)
class Summary:
    """Steady-state median and p90 per phase, and the warm-up batches apart."""

    batches: int
    records_per_batch: float
    total: tuple[float, float]  #: median, p90 of the whole trigger (s)
    phases: dict[str, tuple[float, float]]  #: phase -> (median, p90) s
    work: dict[str, tuple[float, float]]  #: task-side seconds per batch (median, p90)
    warmup: list[dict[str, float]]  #: each warm-up batch's phases


def summarize(
    phases: Sequence[Mapping[str, float]],
    records: Sequence[int],
    warmup: int,
    work: Sequence[Mapping[str, float]] = (),
) -> Summary:
    """Median and p90 of each phase over the batches after the first ``warmup`` ones (a phase a
    batch lacks counts 0 there); the warm-up batches kept whole."""
    steady = list(phases[warmup:])
    names = [n for n in PHASE_LABELS if any(n in p for p in phases)]
    totals = [sum(p.values()) for p in steady]
    work_steady = list(work[warmup:])
    work_names = sorted({n for w in work_steady for n in w})
    return Summary(
        len(steady),
        statistics.fmean(records[warmup:]) if records[warmup:] else 0.0,
        (quantile(totals, 0.5), quantile(totals, 0.9)),
        {
            n: (
                quantile([p.get(n, 0.0) for p in steady], 0.5),
                quantile([p.get(n, 0.0) for p in steady], 0.9),
            )
            for n in names
        },
        {
            n: (
                quantile([w.get(n, 0.0) for w in work_steady], 0.5),
                quantile([w.get(n, 0.0) for w in work_steady], 0.9),
            )
            for n in work_names
        },
        [dict(p) for p in phases[:warmup]],
    )


# --------------------------------------------------------------------------- py-spy
#: (category, path fragments) tried from the innermost frame outwards; the first match wins.
#: pandas and numpy frames match nothing, so they count for whoever called them.
PYTHON_WORKER_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("PySpark Arrow/pandas conversion", ("pyspark/sql/pandas/", "pyarrow/")),
    ("executor sink writer (ours)", ("spark_jobs/executor_sink", "spark_jobs/eos_sink")),
    (
        "state function (ours, with its pandas)",
        ("/operators/", "/lsb/", "/windowing/", "/spark_jobs/", "/streamkit/"),
    ),
    ("worker loop, sockets, serializers", ("pyspark/",)),
)
#: The connector by CPU (py-spy without --idle: waiting threads are not sampled).
CONNECTOR_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("InfluxDB write (request, response)", ("influx_writer", "urllib3", "http/client", "ssl.py")),
    ("commit (offsets + transaction)", ("committer",)),
    ("conversion to points", ("db_connector/batch", "db_connector/points", "lineprotocol")),
    ("latency sampling, metrics", ("_observe_latency", "prometheus_client")),
    ("consume (Kafka read)", ("_take",)),
    ("main loop, other", ("db_connector/",)),
)


def parse_pyspy_raw(
    lines: Iterable[str], rules: Sequence[tuple[str, Sequence[str]]]
) -> dict[str, int]:
    """Samples per category of py-spy's ``--format raw`` (collapsed stacks, root first,
    ``frame;frame;... count``; a frame is ``function (file:line)``): each stack goes to the
    category of its innermost frame that matches a rule, "other" if none does."""
    counts: dict[str, int] = {}
    for line in lines:
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not stack or not count.isdigit():
            continue
        category = "other"
        for frame in reversed(stack.split(";")):
            category = next(
                (name for name, needles in rules if any(n in frame for n in needles)), ""
            )
            if category:
                break
        counts[category or "other"] = counts.get(category or "other", 0) + int(count)
    return counts


def read_pyspy(paths: Iterable[Path], rules: Sequence[tuple[str, Sequence[str]]]) -> dict[str, int]:
    """parse_pyspy_raw over several files (one per profiled process), summed."""
    total: dict[str, int] = {}
    for path in paths:
        if path.exists():
            for name, count in parse_pyspy_raw(path.read_text().splitlines(), rules).items():
                total[name] = total.get(name, 0) + count
    return total


# --------------------------------------------------------------------------- JFR
#: (category, class-name parts) tried from the innermost Java frame outwards, as for py-spy;
#: JDK frames match nothing, so they count for the Spark, Kafka or Arrow code that called them.
JVM_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Kafka fetch (client, TLS)", ("org.apache.kafka.", "org.apache.spark.sql.kafka010.")),
    ("Avro decode", ("org.apache.spark.sql.avro.", "org.apache.avro.")),
    (
        "Arrow to/from the Python worker",
        (
            "org.apache.spark.api.python.",
            "org.apache.spark.sql.execution.python.",
            "org.apache.spark.sql.execution.arrow.",
            "org.apache.arrow.",
        ),
    ),
    ("state store (RocksDB)", ("org.rocksdb.", "org.apache.spark.sql.execution.streaming.state.")),
    ("code generation (Janino)", ("org.codehaus.",)),
    (
        "shuffle, blocks, RPC",
        (
            "org.apache.spark.shuffle.",
            "org.apache.spark.storage.",
            "org.apache.spark.network.",
            "org.apache.spark.rpc.",
            "io.netty.",
        ),
    ),
    ("generated code (project, sort, rows)", ("GeneratedClass", "org.apache.spark.unsafe.")),
    ("checkpoint files (Hadoop FS)", ("org.apache.hadoop.",)),
    (
        "streaming engine (offsets, logs, progress)",
        ("org.apache.spark.sql.execution.streaming.", "org.apache.spark.sql.streaming."),
    ),
    ("Catalyst (analysis, optimizer, planning)", ("org.apache.spark.sql.",)),
    ("scheduler, serialization", ("org.apache.spark.", "com.esotericsoftware.")),
    ("py4j", ("py4j.",)),
)
#: Thread name prefix -> kind, the first match wins.
JVM_THREADS = (
    ("Executor task launch worker", "task threads"),
    ("stream execution thread", "stream execution thread"),
)


def parse_jfr_samples(
    lines: Iterable[str], rules: Sequence[tuple[str, Sequence[str]]] = JVM_RULES
) -> dict[tuple[str, str], int]:
    """Samples per (thread kind, category) of ``jfr print --events jdk.ExecutionSample``: a
    block per sample, ``sampledThread = "name" ...`` and its frames innermost first, one per line
    (``package.Class.method(args) line: N``), between ``stackTrace = [`` and ``]``."""
    counts: dict[tuple[str, str], int] = {}
    thread, in_stack = "", False
    frames: list[str] = []
    for raw in lines:
        line = raw.strip()
        if line.startswith("sampledThread = "):
            name = line.split('"')[1] if '"' in line else line
            thread = next((kind for prefix, kind in JVM_THREADS if name.startswith(prefix)), "")
            thread = thread or "other threads"
        elif line.startswith("stackTrace = ["):
            frames, in_stack = [], True
        elif in_stack and line == "]":
            in_stack = False
            category = "other"
            for frame in frames:
                found = next((c for c, needles in rules if any(n in frame for n in needles)), "")
                if found:
                    category = found
                    break
            counts[(thread, category)] = counts.get((thread, category), 0) + 1
        elif in_stack and line != "...":
            frames.append(line)
    return counts


# --------------------------------------------------------------------------- end to end
def waits_for_next(times: Iterable[float], starts: Sequence[float]) -> list[float]:
    """For each time, the wait until the first of the sorted ``starts`` at or after it (a raw
    record waits for the next batch to start: the batch's offsets are fixed when it starts);
    times after the last start are left out."""
    waits = []
    for t in times:
        i = bisect.bisect_left(starts, t)
        if i < len(starts):
            waits.append(starts[i] - t)
    return waits


# --------------------------------------------------------------------------- output
def phase_table(summaries: Mapping[str, Summary]) -> str:
    """One markdown table: a row per phase, a column (median / p90 s) per operating point."""
    names = [n for n in PHASE_LABELS if any(n in s.phases for s in summaries.values())]
    head = "| phase | " + " | ".join(summaries) + " |"
    lines = [head, "|---" + "|---:" * len(summaries) + "|"]
    for n in names:
        cells = [
            f"{s.phases[n][0]:.3f} / {s.phases[n][1]:.3f}" if n in s.phases else "–"
            for s in summaries.values()
        ]
        lines.append(f"| {PHASE_LABELS[n]} | " + " | ".join(cells) + " |")
    lines.append(
        "| **batch (triggerExecution)** | "
        + " | ".join(f"**{s.total[0]:.3f} / {s.total[1]:.3f}**" for s in summaries.values())
        + " |"
    )
    lines.append(
        "| batches (steady) x records per batch | "
        + " | ".join(f"{s.batches} x {s.records_per_batch:,.0f}" for s in summaries.values())
        + " |"
    )
    return "\n".join(lines)


def work_table(summaries: Mapping[str, Summary]) -> str:
    """Task-side seconds per batch (median / p90), summed over tasks and cores."""
    names = sorted({n for s in summaries.values() for n in s.work})
    lines = ["| task time per batch | " + " | ".join(summaries) + " |"]
    lines.append("|---" + "|---:" * len(summaries) + "|")
    for n in names:
        cells = [
            f"{s.work[n][0]:.3f} / {s.work[n][1]:.3f}" if n in s.work else "–"
            for s in summaries.values()
        ]
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def share_table(
    title: str, columns: Mapping[str, Mapping[str, int]], rate_hz: float, shares_only: bool = False
) -> str:
    """Samples per category as CPU seconds (at ``rate_hz``) and shares, a column per run."""
    names = sorted({n for c in columns.values() for n in c}, key=lambda n: (n == "other", n))
    lines = [f"| {title} | " + " | ".join(columns) + " |", "|---" + "|---:" * len(columns) + "|"]
    for n in names:
        cells = []
        for c in columns.values():
            total = sum(c.values()) or 1
            share = f"{100 * c.get(n, 0) / total:.0f}%"
            cells.append(share if shares_only else f"{c.get(n, 0) / rate_hz:.1f} s ({share})")
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(summaries: Mapping[str, Summary], path: Path) -> None:
    """A stacked bar per operating point: the median of each phase, in the table's order."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [n for n in PHASE_LABELS if any(n in s.phases for s in summaries.values())]
    fig, ax = plt.subplots(figsize=(12, 6.5))
    columns = [textwrap.fill(name, 22) for name in summaries]
    colors = plt.get_cmap("tab20")
    bottoms = [0.0] * len(summaries)
    for i, n in enumerate(names):
        heights = [s.phases.get(n, (0.0, 0.0))[0] for s in summaries.values()]
        ax.bar(columns, heights, bottom=bottoms, label=PHASE_LABELS[n], color=colors(i))
        bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
    ax.set_ylabel("seconds per batch (median of each phase)")
    ax.set_title("Where a micro-batch's time goes (single pass)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
