"""The runner's graceful stop and the listener's export, without a Spark session."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import TYPE_CHECKING, cast

import pytest

from spark_jobs.listener import EVENT_TIME, PrometheusListener
from spark_jobs.runner import BatchGate, StopRequested, failure_report

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: The gate only hands the batch's frame on to its sink, and these sinks ignore it.
NO_FRAME = cast("DataFrame", None)


def test_stop_waits_for_the_batch_in_the_sink_and_refuses_later_ones() -> None:
    entered, release, done = threading.Event(), threading.Event(), []

    def slow_sink(_df: object, batch_id: int) -> None:
        entered.set()
        release.wait(5)
        done.append(batch_id)

    gate = BatchGate(slow_sink)
    worker = threading.Thread(target=gate, args=(NO_FRAME, 7))
    worker.start()
    assert entered.wait(5)
    threading.Timer(0.5, release.set).start()
    started = time.monotonic()
    assert gate.stop_after_current(10) is True
    assert time.monotonic() - started >= 0.4 and done == [7], (
        "stop did not wait for the in-flight batch"
    )
    worker.join(5)
    with pytest.raises(StopRequested):
        gate(NO_FRAME, 8)
    assert done == [7]


def test_a_failure_is_logged_by_its_head_and_tail_and_an_old_state_layout_says_what_to_do() -> None:
    """Spark's message heads the error and the plan follows it: both ends are kept. The key
    schema error (measured with the aggregate job's checkpoint of the (thing, quantity) layout)
    points at the upgrade notes."""
    refused = (
        "[STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE] Provided key schema does not match existing "
        "state key schema.\n=== Streaming Query ===\n" + "plan " * 2000 + "the end"
    )
    report = failure_report(refused)
    assert report["error"].startswith("[STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE]")
    assert report["error"].endswith("the end") and len(report["error"]) < 2100
    assert "CHANGELOG.md" in report["hint"]
    assert failure_report("ValueError: boom") == {"error": "ValueError: boom"}


def test_listener_exports_progress() -> None:
    operator = SimpleNamespace(
        numRowsTotal=24,
        memoryUsedBytes=4096,
        numRowsDroppedByWatermark=0,
        allUpdatesTimeMs=5,
        allRemovalsTimeMs=0,
        commitTimeMs=2,
        customMetrics={},
    )
    progress = SimpleNamespace(
        name="unit-q",
        id="x",
        sources=[],  # PySpark's: a query's sources, each with its rows
        batchId=3,
        batchDuration=1500,
        inputRowsPerSecond=float("nan"),
        processedRowsPerSecond=1200.0,
        numInputRows=50,
        stateOperators=[operator],
        observedMetrics={"event_time": {"newest_ms": 1_554_096_380_000}},
    )
    listener = PrometheusListener()
    listener.record(progress)
    assert EVENT_TIME.labels("unit-q")._value.get() == 1554096380.0
    older = SimpleNamespace(
        **{**vars(progress), "observedMetrics": {"event_time": {"newest_ms": 1_000}}}
    )
    listener.record(older)  # an older batch maximum never moves it back
    assert EVENT_TIME.labels("unit-q")._value.get() == 1554096380.0
    listener.record(SimpleNamespace(**{**vars(progress), "observedMetrics": {}}))
    assert EVENT_TIME.labels("unit-q")._value.get() == 1554096380.0


def state_operator(updates: int, commit: int, custom: dict[str, int]) -> SimpleNamespace:
    return SimpleNamespace(
        allUpdatesTimeMs=updates, allRemovalsTimeMs=0, commitTimeMs=commit, customMetrics=custom
    )


def test_state_times_sum_the_operators_and_keep_only_latencies() -> None:
    from spark_jobs.listener import _state_times

    operators = [
        state_operator(
            120,
            30,
            {
                "rocksdbCommitFlushLatency": 7,
                "rocksdbSstFileSize": 10_000,
                "timerProcessingTimeMs": 4,
            },
        ),
        state_operator(80, 10, {"rocksdbCommitFlushLatency": 3}),
    ]
    assert _state_times(operators) == {
        "updates": 200,
        "removals": 0,
        "commit": 40,
        "rocksdbCommitFlushLatency": 10,
        "timerProcessingTimeMs": 4,
    }
    assert _state_times([]) == {}


def test_spark_conf_setting_becomes_session_settings_and_rejects_a_bare_word() -> None:
    from spark_jobs.config import SparkJobSettings

    settings = SparkJobSettings(spark_conf=" spark.a=1 , spark.b.c = x=y ,")
    assert settings.extra_spark_conf() == {"spark.a": "1", "spark.b.c": "x=y"}
    assert SparkJobSettings().extra_spark_conf() == {}
    with pytest.raises(ValueError, match="not key=value"):
        SparkJobSettings(spark_conf="spark.a=1,oops").extra_spark_conf()


def test_driver_java_options_keep_the_configured_ones_and_add_the_class_archive(tmp_path) -> None:
    from spark_jobs import class_archive
    from spark_jobs.config import SparkJobSettings
    from spark_jobs.runner import driver_java_options

    archive = class_archive.prepare(tmp_path)
    quick = SparkJobSettings(driver_java_options="-XX:TieredStopAtLevel=1")
    assert (
        driver_java_options(quick, archive) == f"-XX:TieredStopAtLevel=1 {archive.java_options()}"
    )
    assert driver_java_options(quick, None) == "-XX:TieredStopAtLevel=1"
    assert (
        driver_java_options(SparkJobSettings(driver_java_options=" "), archive)
        == archive.java_options()
    )
    assert SparkJobSettings().driver_java_options == "-XX:TieredStopAtLevel=1", (
        "the default is the quick JIT"
    )


def test_the_checkpoint_is_private_and_so_is_the_run_dir_s_checkpoints(tmp_path) -> None:
    from spark_jobs.config import SparkJobSettings

    default = SparkJobSettings(run_dir=tmp_path / "run").private_checkpoint("q")
    assert default == tmp_path / "run" / "checkpoints" / "q"
    assert default.stat().st_mode & 0o777 == default.parent.stat().st_mode & 0o777 == 0o700
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    mine = SparkJobSettings(checkpoint_dir=str(shared / "q")).private_checkpoint("ignored")
    assert mine == shared / "q" and mine.stat().st_mode & 0o777 == 0o700
    assert shared.stat().st_mode & 0o777 == 0o755, "a configured checkpoint's parent is the user's"


def test_a_driver_on_this_machine_listens_on_loopback_unless_the_job_chose(monkeypatch) -> None:
    from spark_jobs.session import loopback_driver, loopback_master

    monkeypatch.delenv("SPARK_LOCAL_IP", raising=False)
    loopback = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}
    for master in ("local[*]", "local[2]", "spark://127.0.0.1:7077", "spark://localhost:7077"):
        assert loopback_master(master) and loopback_driver(master, {}) == loopback, master
    # executors elsewhere connect to the driver: its address is the cluster's business
    assert not loopback_master("spark://spark-master:7077")
    assert loopback_driver("spark://spark-master:7077", {}) == {}
    assert loopback_driver("local[*]", {"spark.driver.bindAddress": "0.0.0.0"}) == {}
    monkeypatch.setenv("SPARK_LOCAL_IP", "10.0.0.5")
    assert loopback_driver("local[*]", {}) == {}
