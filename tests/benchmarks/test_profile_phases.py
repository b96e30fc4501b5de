"""The micro-batch profile's pure parts: Spark's event log and progress into wall phases per
batch, their median and p90 apart from the warm-up, and py-spy's samples by kind of code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.support.profile_phases import (
    CONNECTOR_RULES,
    PYTHON_WORKER_RULES,
    Stage,
    assign_by_time,
    batch_phases,
    classify_stage,
    parse_event_log,
    parse_jfr_samples,
    parse_pyspy_raw,
    phase_table,
    plot,
    share_table,
    stage_work,
    summarize,
    waits_for_next,
)
from benchmarks.support.quantile import quantile


def _job(job_id: int, stages: list[int], batch: int | None) -> str:
    properties = {"spark.sql.execution.id": "3"}
    if batch is not None:
        properties["streaming.sql.batchId"] = str(batch)
    return json.dumps(
        {
            "Event": "SparkListenerJobStart",
            "Job ID": job_id,
            "Stage IDs": stages,
            "Properties": properties,
        }
    )


def _stage(stage_id: int, submitted: int, completed: int, accumulables: dict) -> str:
    return json.dumps(
        {
            "Event": "SparkListenerStageCompleted",
            "Stage Info": {
                "Stage ID": stage_id,
                "Submission Time": submitted,
                "Completion Time": completed,
                "Accumulables": [
                    # task metrics are numbers in the log, SQL metrics strings
                    {"ID": i, "Name": name, "Value": value, "Internal": name.startswith("int")}
                    for i, (name, value) in enumerate(accumulables.items())
                ],
            },
        }
    )


READ: dict[str, int | str] = {
    "internal.metrics.executorRunTime": 300,
    "internal.metrics.shuffle.write.writeTime": 20_000_000,
    "number of output rows": "4000",
}
READ_VALUES = {k: float(v) for k, v in READ.items()}
STATEFUL: dict[str, int | str] = {
    "internal.metrics.executorRunTime": 500,
    "internal.metrics.shuffle.read.fetchWaitTime": 4,
    "time to run Python workers": "350",
    "time to update": "380",
    "time to commit changes": "40",
    "number of total state rows": "100",
}


def test_the_event_log_gives_each_batch_its_stages_with_walls_and_metrics() -> None:
    lines = [
        "{not json",
        _job(0, [0, 1], batch=7),
        _stage(0, 1_000, 1_250, READ),
        _stage(1, 1_250, 1_700, STATEFUL),
        _job(1, [2], batch=None),  # not a streaming batch's job (a listener's, say)
        _stage(2, 2_000, 2_100, READ),
        _job(2, [3], batch=8),
        '{"Event": "SparkListenerStageCompleted", "Stage Info": {"Stage ID": 3',  # cut short
    ]
    batches = parse_event_log(lines)
    assert sorted(batches) == [-1, 7]
    assert [s.stage_id for s in batches[-1]] == [2]
    assert assign_by_time(batches.pop(-1), {7: (0.0, 1.0), 8: (1.9, 2.2)}) == {
        8: [Stage(2, "read", 0.1, READ_VALUES, 2.1)]
    }
    read, stateful = batches[7]
    assert (read.kind, read.wall_s) == ("read", 0.25)
    assert (stateful.kind, stateful.wall_s) == ("stateful", 0.45)
    assert stateful.accumulables["time to update"] == 380.0
    work = stage_work(batches[7])
    assert work["shuffle write"] == pytest.approx(0.02)
    assert work["executor run"] == pytest.approx(0.8)
    assert work["Kafka scan stage run"] == pytest.approx(0.3)
    assert work["Python workers run"] == pytest.approx(0.35)
    assert work["state commit"] == pytest.approx(0.04)


def test_stages_are_told_apart_by_what_their_tasks_did() -> None:
    assert classify_stage({k: float(v) for k, v in READ.items()}) == "read"
    assert classify_stage({k: float(v) for k, v in STATEFUL.items()}) == "stateful"
    writer = {
        "internal.metrics.shuffle.read.fetchWaitTime": 1.0,
        "time to run Python workers": 90.0,
    }
    assert classify_stage(writer) == "sink tasks"
    assert classify_stage({"internal.metrics.executorRunTime": 5.0}) == "other stage"


PROGRESS = {
    "batch_id": 7,
    "input_rows": 4000,
    "duration_ms": 1000,
    "phases_ms": {
        "triggerExecution": 1000,
        "latestOffset": 30,
        "queryPlanning": 60,
        "addBatch": 800,
        "walCommit": 40,
        "commitOffsets": 30,
        "getBatch": 0,
    },
}


def test_a_driver_sink_batch_splits_into_phases_that_add_up_to_the_trigger() -> None:
    commit = {"batch_id": 7, "phases_s": {"collect": 0.7, "produce": 0.03, "commit": 0.01}}
    stages = [Stage(0, "read", 0.25, {}), Stage(1, "stateful", 0.4, {})]
    phases = batch_phases(PROGRESS, commit, stages)
    assert sum(phases.values()) == pytest.approx(1.0)
    assert phases["read"] == pytest.approx(0.25)
    assert phases["stateful"] == pytest.approx(0.4)
    assert phases["jobs other"] == pytest.approx(0.05)  # collect - its stages
    assert phases["foreachBatch other"] == pytest.approx(0.06)  # addBatch - collect - sink
    assert phases["spark other"] == pytest.approx(0.04)  # trigger - addBatch - named phases


def test_stages_longer_than_the_collect_are_scaled_down_not_overflowing() -> None:
    commit = {"phases_s": {"collect": 0.5, "produce": 0.0, "commit": 0.0}}
    phases = batch_phases(
        PROGRESS, commit, [Stage(0, "read", 0.4, {}), Stage(1, "stateful", 0.6, {})]
    )
    assert phases["read"] + phases["stateful"] == pytest.approx(0.5)
    assert phases["jobs other"] == 0.0
    assert sum(phases.values()) == pytest.approx(1.0)


def test_an_executor_sink_batch_has_its_writer_stage_inside_add_batch() -> None:
    commit = {"batch_id": 7, "rows": 10, "seconds": 0.79}  # the executors' sink: no phases_s
    stages = [
        Stage(0, "read", 0.2, {}),
        Stage(1, "stateful", 0.3, {}),
        Stage(2, "sink tasks", 0.25, {}),
    ]
    phases = batch_phases(PROGRESS, commit, stages)
    assert "produce" not in phases
    assert phases["sink tasks"] == pytest.approx(0.25)
    assert phases["jobs other"] == pytest.approx(0.05)
    assert phases["foreachBatch other"] == 0.0
    assert sum(phases.values()) == pytest.approx(1.0)


def test_without_an_event_log_the_jobs_stay_one_phase() -> None:
    phases = batch_phases(PROGRESS)
    assert phases["jobs other"] == pytest.approx(0.8)
    assert sum(phases.values()) == pytest.approx(1.0)


def test_steady_batches_are_summarized_and_the_warm_up_kept_apart() -> None:
    first = {"latestOffset": 0.5, "read": 4.0}
    steady = [{"latestOffset": 0.01 * i, "read": 0.1 * i} for i in range(1, 11)]
    summary = summarize(
        [first, *steady], [100] + [10] * 10, warmup=1, work=[{}, *[{"x": 1.0}] * 10]
    )
    assert summary.batches == 10
    assert summary.records_per_batch == 10
    assert summary.warmup == [first]
    assert summary.phases["read"] == (pytest.approx(0.6), pytest.approx(1.0))
    assert summary.total == (pytest.approx(0.66), pytest.approx(1.1))
    assert summary.work["x"] == (1.0, 1.0)
    table = phase_table({"live": summary})
    assert "| **batch (triggerExecution)** | **0.660 / 1.100** |" in table
    assert "10 x 10" in table


def test_the_plot_is_written(tmp_path: Path) -> None:
    summary = summarize([{"read": 0.2, "stateful": 0.3}] * 3, [5] * 3, warmup=1)
    plot({"a": summary, "b": summary}, tmp_path / "p.png")
    assert (tmp_path / "p.png").read_bytes().startswith(b"\x89PNG")


SITE = "/v/lib/python3.11/site-packages"
WORKER = f'process 9:"python -m spark_jobs.python_daemon";main ({SITE}/pyspark/worker.py:1)'


def test_py_spy_stacks_go_to_their_innermost_known_frame() -> None:
    lines = [
        # Arrow -> pandas while our function pulls its frames: PySpark's, not ours
        f"{WORKER};__call__ (/w/spark_jobs/stateful.py:80);arrival_order (/w/spark_jobs/"
        f"key_records.py:9);load_stream ({SITE}/pyspark/sql/pandas/serializers.py:5);"
        f"to_pandas ({SITE}/pandas/core/frame.py:3) 7",
        # pandas our function calls itself: ours
        f"{WORKER};__call__ (/w/spark_jobs/stateful.py:80);sort ({SITE}/pandas/core/x.py:1) 5",
        f"{WORKER};process (/w/lsb/buffer.py:3) 2",
        f"{WORKER};read_int ({SITE}/pyspark/serializers.py:2) 3",
        f"{WORKER};write (/w/spark_jobs/executor_sink.py:9) 1",
        'process 9:"python -m spark_jobs.python_daemon";<module> (/x/elsewhere.py:1) 4',
        "not a line",
    ]
    counts = parse_pyspy_raw(lines, PYTHON_WORKER_RULES)
    assert counts == {
        "PySpark Arrow/pandas conversion": 7,
        "state function (ours, with its pandas)": 7,
        "worker loop, sockets, serializers": 3,
        "executor sink writer (ours)": 1,
        "other": 4,
    }
    table = share_table("Python workers", {"run": counts}, rate_hz=10)
    assert "| PySpark Arrow/pandas conversion | 0.7 s (32%) |" in table
    assert table.splitlines()[-1].startswith("| other |")


def test_the_connector_s_stacks_by_step() -> None:
    root = 'process 5:"python -m db_connector";run (/w/db_connector/connector.py:160)'
    lines = [
        f"{root};_take (/w/db_connector/connector.py:225) 10",
        f"{root};add_chunk (/w/db_connector/batch.py:40);decode (/w/db_connector/points.py:9) 6",
        f"{root};_settle (/w/db_connector/connector.py:260);commit (/w/db_connector/"
        "committer.py:70) 2",
        f"write (/w/db_connector/influx_writer.py:70);send ({SITE}/urllib3/conn.py:1) 3",
    ]
    assert parse_pyspy_raw(lines, CONNECTOR_RULES) == {
        "consume (Kafka read)": 10,
        "conversion to points": 6,
        "commit (offsets + transaction)": 2,
        "InfluxDB write (request, response)": 3,
    }


def test_a_record_waits_for_the_next_batch_start() -> None:
    assert waits_for_next([0.5, 1.0, 1.2, 9.0], [1.0, 2.0, 3.0]) == [0.5, 0.0, 0.8]


def test_quantile_by_rank() -> None:
    assert quantile([3.0, 1.0, 2.0, 4.0], 0.5) == 3.0
    assert quantile([3.0, 1.0, 2.0, 4.0], 0.9) == 4.0
    assert quantile([], 0.5) != quantile([], 0.5)  # NaN


def test_the_report_is_made_from_what_the_runs_left(tmp_path: Path) -> None:
    """profile_batch's glue: a run's log, event log and py-spy output -> tables and a plot."""
    from benchmarks.profile_batch import main
    from benchmarks.support.spark_run import log_time

    run_dir = tmp_path / "live-driver"
    (run_dir / "eventlog").mkdir(parents=True)
    log, events = [], []
    for batch in range(6):
        end = f"2026-11-26T10:00:{10 + batch:02d}.500Z"
        log.append(
            {
                "ts": end,
                "msg": "batch committed",
                "batch_id": batch,
                "phases_s": {"collect": 0.5, "produce": 0.02, "commit": 0.01},
            }
        )
        log.append(
            {
                **PROGRESS,
                "ts": end,
                "msg": "batch progress",
                "batch_id": batch,
                "state_ms": {"commit": 40, "rocksdbLoadLatencyMs": 3, "rocksdbPutLatency": 0},
            }
        )
        events += [_job(batch, [2 * batch, 2 * batch + 1], batch=batch)]
        events += [_stage(2 * batch, 0, 200, READ), _stage(2 * batch + 1, 200, 500, STATEFUL)]
    (run_dir / "job.log").write_text("\n".join(json.dumps(e) for e in log) + "\n")
    (run_dir / "eventlog" / "local-1").write_text("\n".join(events) + "\n")
    (run_dir / "pyspy-workers-9.txt").write_text(f"{WORKER};process (/w/lsb/buffer.py:3) 50\n")
    start = log_time("2026-11-26T10:00:12.000Z")  # batches 0-1 are the warm-up
    runs = {
        "command": "python benchmarks/profile_batch.py",
        "load": "0.5 0.4 0.3",
        "spark": [
            {
                "point": "live",
                "sink": "driver",
                "window": [start, start + 60],
                "cpu_s": 30.0,
                "log": str(run_dir / "job.log"),
                "eventlog": str(run_dir / "eventlog"),
            }
        ],
    }
    (tmp_path / "runs.json").write_text(json.dumps(runs))
    assert main(["--out", str(tmp_path), "--report-only"]) == 0
    text = (tmp_path / "profile.md").read_text()
    assert "| stage 1: Kafka fetch + Avro decode + shuffle write | 0.200 / 0.200 |" in text
    assert "4 x 4,000" in text
    assert "2 warm-up batches" in text
    assert "| state store: rocksdbLoadLatencyMs | 0.003 / 0.003 |" in text
    assert "| state function (ours, with its pandas) | 1.0 s (100%) |" in text
    assert (tmp_path / "profile.png").exists()


JFR_TEXT = """
jdk.ExecutionSample {
  startTime = 17:50:11.746
  sampledThread = "Executor task launch worker for task 1.0 in stage 2.0 (TID 5)" (javaThreadId = 9)
  state = "STATE_RUNNABLE"
  stackTrace = [
    java.util.HashMap.get(Object) line: 556
    org.apache.spark.sql.avro.AvroDeserializer.deserialize(Object) line: 80
    org.apache.spark.sql.catalyst.expressions.GeneratedClass$GeneratedIterator1.processNext()
    ...
  ]
}

jdk.ExecutionSample {
  startTime = 17:50:11.756
  sampledThread = "Executor task launch worker for task 2.0 in stage 2.0 (TID 6)" (javaThreadId = 1)
  state = "STATE_RUNNABLE"
  stackTrace = [
    sun.nio.ch.NioSocketImpl.read(byte[], int, int) line: 1
    org.apache.kafka.common.network.SslTransportLayer.read(ByteBuffer) line: 2
    org.apache.spark.sql.kafka010.KafkaDataConsumer.get(long) line: 3
  ]
}

jdk.ExecutionSample {
  startTime = 17:50:11.766
  sampledThread = "stream execution thread for q [id = 1]" (javaThreadId = 11)
  state = "STATE_RUNNABLE"
  stackTrace = [
    org.apache.spark.sql.catalyst.trees.TreeNode.transformDown(PartialFunction) line: 4
  ]
}

jdk.ExecutionSample {
  startTime = 17:50:11.776
  sampledThread = "dispatcher-event-loop-0" (javaThreadId = 12)
  state = "STATE_RUNNABLE"
  stackTrace = [
    java.lang.Object.wait() line: 1
  ]
}
"""


def test_jfr_samples_go_to_their_thread_and_innermost_known_frame() -> None:
    assert parse_jfr_samples(JFR_TEXT.splitlines()) == {
        ("task threads", "Avro decode"): 1,
        ("task threads", "Kafka fetch (client, TLS)"): 1,
        ("stream execution thread", "Catalyst (analysis, optimizer, planning)"): 1,
        ("other threads", "other"): 1,
    }


def test_the_python_daemon_is_told_from_the_jvm_that_names_it_in_its_settings() -> None:
    from benchmarks.support.profilers import _is_daemon

    assert _is_daemon(b"/v/bin/python\0-m\0spark_jobs.python_daemon\0pyspark.worker\0")
    jvm = b"/usr/bin/java\0-cp\0x\0--conf\0spark.python.daemon.module=spark_jobs.python_daemon\0"
    assert not _is_daemon(jvm)
