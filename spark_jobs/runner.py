"""The lifecycle every streaming job shares: session, metrics, listener, EOS sink, graceful stop.

A job supplies only ``build(spark) -> DataFrame`` whose rows are Kafka records (columns
``topic``, ``key``, ``value`` and optionally ``partition``, ``headers``); :func:`run_query`
writes them exactly once through the sink SPARK_SINK chooses (:mod:`spark_jobs.sinks`).

Stopping: SIGTERM/SIGINT only set a flag. The main thread then lets the batch that is inside
the sink finish (its transaction commits), refuses any later batch (it raises before
producing, so Spark fails that batch without output and replays it on restart), and calls
``query.stop()``. A batch that committed to Kafka but not to Spark's commit log is skipped on
restart by its marker, so every way of stopping is exactly-once. Exit code 0 for a requested
stop (or a finished ``--available-now`` run), 1 when the query failed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spark_jobs import class_archive, listener
from spark_jobs.config import SparkJobSettings
from spark_jobs.eos_sink import FaultHook
from spark_jobs.session import build_session
from spark_jobs.sinks import BatchStage, make_sink
from spark_jobs.warmup import warm_python_workers
from streamkit.durations import duration_ms
from streamkit.shutdown import ShutdownFlag

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger("spark_jobs.runner")


#: Spark 4.1.1's Kafka source fails the progress report of the first batch after a restart when
#: that batch is re-run from the offset log (SPARK-55271: NullPointerException, fixed after 4.1.1).
#: The report comes after the batch's output and its commit-log entry, so starting the query again
#: from the checkpoint goes on with the next batch: nothing is lost or repeated (and a restart from
#: the checkpoint is exact whatever the cause). Matched by the message: the Python error does not
#: carry the stack trace that names KafkaMicroBatchStream.metrics.
RECOVERED_BATCH_REPORT_BUG = 'because the return value of "scala.Option.get()" is null'
RECOVERY_RESTARTS = 3

#: Spark's refusal of a checkpoint whose state was written in another layout than the query's.
STATE_LAYOUT_CHANGED = (
    "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE",
    "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE",
)


class StopRequested(RuntimeError):
    """Raised into a batch that started after shutdown was requested (it is replayed later)."""


class BatchGate:
    """Wraps the sink: tracks the in-flight batch and refuses new ones once stopping."""

    def __init__(self, sink: Callable[[Any, int], None]) -> None:
        self.sink = sink
        self._cond = threading.Condition()
        self._stopping = False
        self._in_flight: int | None = None

    @property
    def stopping(self) -> bool:
        return self._stopping

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        with self._cond:
            if self._stopping:
                raise StopRequested(f"shutdown requested: batch {batch_id} left for the restart")
            self._in_flight = batch_id
        try:
            self.sink(batch_df, batch_id)
        finally:
            with self._cond:
                self._in_flight = None
                self._cond.notify_all()

    def stop_after_current(self, timeout_s: float) -> bool:
        """Refuse new batches, wait for the one in the sink. True if none is left in flight."""
        with self._cond:
            self._stopping = True
            in_flight = self._in_flight
            done = self._cond.wait_for(lambda: self._in_flight is None, timeout_s)
        log.info(
            "stopping after the current batch",
            extra={"in_flight_batch": in_flight, "drained": done},
        )
        return done


def driver_java_options(
    settings: SparkJobSettings, archive: class_archive.ClassArchive | None
) -> str:
    """The configured options, then the class archive's (the archive's own, never overridden)."""
    return " ".join(
        part
        for part in (
            settings.driver_java_options.strip(),
            archive.java_options() if archive else "",
        )
        if part
    )


def run_query(
    settings: SparkJobSettings,
    shutdown: ShutdownFlag,
    default_query: str,
    build: Callable[[SparkSession], DataFrame],
    *,
    available_now: bool = False,
    session_conf: dict[str, str] | None = None,
    stop_timeout_s: float = 120.0,
    fault_hook: FaultHook | None = None,
    warm_module: str | None = None,
    batches: BatchStage | None = None,
) -> int:
    """Run one exactly-once streaming query until ``shutdown`` (or until caught up with
    ``available_now``). Logs, SIGTERM and /metrics are the caller's: a job's ``main`` starts
    through :func:`streamkit.service.run_service`. ``fault_hook``: the sink's, for the tests;
    ``warm_module``: the module the Python workers import ahead of the first batch;
    ``batches``: what runs each batch around the sink (default: the sink alone)."""
    from pyspark import SparkContext
    from pyspark.errors import StreamingQueryException

    query_name = settings.query(default_query)
    checkpoint = settings.private_checkpoint(query_name)
    started = time.monotonic()
    sink = make_sink(settings, query_name, fault_hook)
    threading.Thread(
        target=sink.prepare, name="eos-sink-prepare", daemon=True
    ).start()  # while the JVM starts
    archive = (
        class_archive.prepare(Path(settings.class_archive_dir))
        if settings.class_archive_dir
        else None
    )
    spark = build_session(
        query_name,
        settings.spark_master,
        settings.shuffle_partitions,
        {**(session_conf or {}), **settings.extra_spark_conf()},
        jars_dir=settings.spark_jars_dir,
        driver_java_options=driver_java_options(settings, archive),
        cluster_secret=settings.credential("spark", "cluster").reveal(),
        log_format=settings.log_format,
    )
    listener.attach(spark, query_name)
    listener.export_state_bounds(query_name, settings.state_alert_keys, settings.state_alert_bytes)
    gate = BatchGate(batches(sink, checkpoint) if batches is not None else sink)
    writer = (
        build(spark)
        .writeStream.queryName(query_name)
        .option("checkpointLocation", str(checkpoint))
        .foreachBatch(gate)
    )
    writer = (
        writer.trigger(availableNow=True)
        if available_now
        else writer.trigger(processingTime=f"{duration_ms(settings.trigger)} milliseconds")
    )
    if warm_module and settings.warm_python_workers:
        warm_python_workers(spark, warm_module, settings.shuffle_partitions)
    try:
        for attempt in range(1 + RECOVERY_RESTARTS):
            query = writer.start()
            log.info(
                "query running",
                extra={
                    "query": query_name,
                    "query_id": str(query.id),
                    "checkpoint": str(checkpoint),
                    "master": settings.spark_master,
                    "startup_s": round(time.monotonic() - started, 1),
                },
            )
            while query.isActive and not shutdown.requested:
                shutdown.wait(0.5)
            if shutdown.requested and query.isActive:
                gate.stop_after_current(stop_timeout_s)
                query.stop()
            failure = _failure(query, gate, StreamingQueryException)
            if not (failure and RECOVERED_BATCH_REPORT_BUG in failure and not shutdown.requested):
                break
            log.warning(
                "query restarted: Spark failed the progress report of the batch it recovered "
                "from the checkpoint (SPARK-55271); that batch is committed, so the query goes "
                "on after it",
                extra={"query": query_name, "attempt": attempt + 1},
            )
    finally:
        sink.close()
        spark.stop()
        if archive is not None:
            class_archive.finish(archive, getattr(SparkContext._gateway, "proc", None))
    if failure:
        log.error("query failed", extra={"query": query_name, **failure_report(failure)})
        return 1
    log.info(
        "query stopped", extra={"query": query_name, "last_committed_batch": sink.last_committed}
    )
    return 0


def failure_report(text: str, limit: int = 1000) -> dict[str, str]:
    """The log fields of a query's error: its head (Spark's error class and message) and its
    tail (the Python worker's exception, when one raised), and what to do when the checkpoint's
    state has another layout than this version keeps."""
    error = text if len(text) <= 2 * limit else f"{text[:limit]} ... {text[-limit:]}"
    report = {"error": error}
    if any(name in text for name in STATE_LAYOUT_CHANGED):
        report["hint"] = (
            "the checkpoint holds state in a layout this version does not read: see "
            "CHANGELOG.md, Upgrading, for what to do"
        )
    return report


def _failure(query: Any, gate: BatchGate, exception_type: type[BaseException]) -> str | None:
    """The query's error, unless it is the StopRequested we raised ourselves while stopping."""
    try:
        error = query.exception()
    except exception_type as exc:  # some versions raise instead of returning
        error = exc
    if error is None:
        return None
    text = str(error)
    if gate.stopping and "StopRequested" in text:
        return None
    return text
