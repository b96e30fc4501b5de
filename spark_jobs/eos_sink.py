"""Exactly-once Kafka output for Structured Streaming's ``foreachBatch``.

Spark's own Kafka sink is at-least-once: a batch that failed after some tasks wrote is run
again. This sink makes Spark -> Kafka exactly-once at the granularity of a micro-batch:

* One confluent-kafka transactional producer per query with a **stable** ``transactional.id``
  (``<user>.eos-<query name>``, see :func:`owned_name`; no run id, no batch id).
  ``init_transactions()`` on (re)start fences any zombie still holding that id and aborts
  whatever transaction it left open.
* Only after that, the **commit marker** of this query is read from a compacted marker topic
  (key = query name, value JSON ``{"batch_id", "rows", "query_id", "committed_at"}``) up to the
  partition's *high watermark*, with ``read_committed``. (Not to the last stable offset: another
  query's open transaction would hide our own later, committed marker; see ``read_marker``.)
* For every batch: ``batch_id <= last committed`` -> skip (Spark replays a batch with the same
  id, offsets and watermark after a crash). Otherwise one transaction holds every output row
  *and* the marker for this batch id; then ``commit_transaction``. A Kafka error -> abort (or,
  when the outcome is unknown, re-fence and read the marker) and write the batch again, a few
  times; after that, or on any other error, raise: Spark fails the batch and a restart
  replays it.

Why that is exactly-once for this hop: the batch's output and "batch N is done" become
visible atomically to ``read_committed`` readers. A crash before the commit leaves nothing
visible (the transaction is aborted by the next ``init_transactions`` or times out); a crash
after it leaves the marker, so the replay of N is skipped. Spark's replay is deterministic
(same offsets, same watermark, state restored from the checkpoint), so a batch recomputed
after a crash *before* the commit yields the same rows. Empty batches write nothing: their
replay is empty too.

The marker is keyed by query name but also records Spark's ``query.id`` (kept in the
checkpoint): a marker from a different query id means the checkpoint was deleted or replaced,
batch ids restart at 0, and the old marker must not swallow the new query's batches.

Limits:
* A batch's output passes through the driver (collected as Arrow, produced by one producer):
  fine at our volumes (~0.1 s per 10k rows to collect); the driver must hold one batch.
* The scale variant, per-task transactions written by the executors, is
  ``spark_jobs.executor_sink`` (SPARK_SINK=executors); it reuses this class per output partition.
* Readers must use ``read_committed``; a stuck open transaction (e.g. a killed driver never
  restarted) blocks them at the last stable offset until ``transaction.timeout.ms``.

Fault injection: the sink calls its ``fault_hook`` (none in production) with the point
(before_produce, after_produce, after_commit) and the batch id; the tests install one that
SIGKILLs the driver there (tests/support/sink_faults.py), so the service has no test switch.
"""

from __future__ import annotations

import collections
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaError, KafkaException, Producer
from prometheus_client import Counter, Gauge, Histogram

from streamkit.config import KafkaSettings
from streamkit.deadline import Backoff, Deadline, TimedOut
from streamkit.durations import duration_ms
from streamkit.kafka_clients import owned_name, produce_retrying, transactional_producer
from streamkit.kafka_io import end_offsets, read_up_to

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger("spark_jobs.eos_sink")

TRANSACTIONS = Counter(
    "eos_transactions_total",
    "Kafka transactions of the exactly-once sink, by outcome",
    ["query", "outcome"],
)
SKIPPED = Counter(
    "eos_skipped_batches_total",
    "replayed batches skipped because their marker was committed",
    ["query"],
)
EMPTY = Counter(
    "eos_empty_batches_total", "batches with no output rows (no transaction needed)", ["query"]
)
RECORDS = Counter(
    "eos_records_total", "records committed to Kafka by the exactly-once sink", ["query"]
)
DEAD_LETTERS = Counter(
    "eos_dead_letters_total",
    "dead letters committed by the exactly-once sink (input the job could not read), by reason",
    ["query", "reason"],
)
FENCED = Counter(
    "eos_producer_fenced_total",
    "batches given up because another producer took this query's transactional id",
    ["query"],
)
LAST_BATCH = Gauge("eos_last_committed_batch", "batch id of the last committed marker", ["query"])
OPEN_SINCE = Gauge(
    "eos_transaction_open_since_seconds",
    "when the transaction now open began (Unix seconds); 0 while none is",
    ["query"],
)
PHASE_SECONDS = Histogram(
    "eos_phase_seconds",
    "time per batch phase (collect, produce, commit)",
    ["query", "phase"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)

#: Called at each fault point with (point, batch id); see the module docstring.
FaultHook = Callable[[str, int], None]

#: (topic, key, value, partition or None, headers or None): one output record.
OutputRow = tuple[
    str, bytes | None, bytes | None, int | None, list[tuple[str, bytes | None]] | None
]


class SinkError(RuntimeError):
    """The batch was not committed (aborted or unknown); Spark must fail and replay it."""


@dataclass(frozen=True)
class Marker:
    batch_id: int
    query_id: str | None


def _high_watermarks(settings: KafkaSettings, topic: str, timeout_s: float) -> dict[int, int]:
    """End offset per partition (read_uncommitted), retrying transient broker errors until the
    deadline: a restart must not fail because the broker was briefly slow. Unlike the tools'
    ``high_watermarks``, a missing topic is an error here (retried, then SinkError): a sink
    without its marker topic must not start as if nothing were committed."""
    deadline = Deadline(timeout_s)
    while True:
        try:
            return end_offsets(
                settings, topic, role=owned_name(settings, "eos-marker"), strict=True
            )
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            fatal = (
                isinstance(error, KafkaError)
                and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
            )
            if fatal or deadline.expired():
                raise SinkError(f"marker topic {topic}: end offsets not readable: {exc}") from exc
            log.warning(
                "marker topic end offsets not readable yet, retrying", extra={"error": str(exc)}
            )
            time.sleep(1)


def read_marker(
    settings: KafkaSettings, marker_topic: str, key: str, timeout_s: float = 60.0
) -> Marker | None:
    """The last committed marker for ``key``, or None.

    Reads every partition to its *high watermark* (taken read_uncommitted) with a
    read_committed consumer. Stopping at the last stable offset instead would be wrong on a
    shared marker topic: another query's open transaction keeps the LSO behind our own
    later, already committed marker, and we would redo (duplicate) that batch. Waiting for
    the LSO to pass the high watermark costs at most another writer's transaction duration.
    """
    ends = _high_watermarks(settings, marker_topic, timeout_s)
    wanted = key.encode()
    # (partition, offset, value) of the latest marker seen; the value None is a tombstone
    found: tuple[int | None, int | None, bytes | None] | None = None
    try:
        for message in read_up_to(
            settings,
            marker_topic,
            ends,
            timeout_s=timeout_s,
            role=owned_name(settings, "eos-marker"),
        ):
            if message.key() == wanted:
                found = (message.partition(), message.offset(), message.value())
    except TimedOut as exc:
        raise SinkError(
            f"marker topic {marker_topic} not readable to its end within {timeout_s}s "
            f"({exc}: a hanging transaction?)"
        ) from exc
    if found is None or found[2] is None:  # None value: a tombstone (marker deleted on purpose)
        return None
    body = json.loads(found[2])
    return Marker(int(body["batch_id"]), body.get("query_id"))


def arrow_rows(table: Any) -> Iterator[OutputRow]:
    """Rows of an Arrow table with columns topic, key, value [, partition] [, headers]."""
    names = set(table.column_names)
    missing = {"topic", "key", "value"} - names
    if missing:
        raise SinkError(f"batch lacks output columns {sorted(missing)} (has {sorted(names)})")
    n = table.num_rows
    topics = table.column("topic").to_pylist()
    keys = table.column("key").to_pylist()
    values = table.column("value").to_pylist()
    partitions = table.column("partition").to_pylist() if "partition" in names else [None] * n
    headers = table.column("headers").to_pylist() if "headers" in names else [None] * n
    for i in range(n):
        row_headers = headers[i]
        if row_headers is not None:
            row_headers = [(h["key"], h["value"]) for h in row_headers]
        yield topics[i], keys[i], values[i], partitions[i], row_headers


class ArrowRows:
    """The output rows of a collected batch, iterable again for every attempt to write it."""

    def __init__(self, table: Any) -> None:
        self.table = table

    def __iter__(self) -> Iterator[OutputRow]:
        return arrow_rows(self.table)


class Replayable:
    """Rows that a second attempt can iterate again, even when given as a one-shot iterator:
    what the first pass took is kept and replayed, then the source continues."""

    def __init__(self, rows: Iterable[OutputRow]) -> None:
        self.source = iter(rows) if iter(rows) is rows else None
        self.rows = rows
        self.taken: list[OutputRow] = []

    def __iter__(self) -> Iterator[OutputRow]:
        if self.source is None:  # a list or ArrowRows: iterable again by itself
            yield from self.rows
            return
        yield from self.taken
        for row in self.source:
            self.taken.append(row)
            yield row


def produce_all(producer: Producer, rows: Iterable[OutputRow]) -> tuple[int, collections.Counter]:
    """Queue every row; the count, and the dead letters among them (a ``reason`` header) by
    reason."""
    count = 0
    dead_letters: collections.Counter[str] = collections.Counter()
    for topic, key, value, partition, headers in rows:
        kwargs: dict[str, Any] = {}
        if partition is not None:
            kwargs["partition"] = partition
        if headers:
            kwargs["headers"] = headers
            reason = dict(headers).get("reason")
            if reason is not None:
                dead_letters[reason.decode("utf-8", "replace")] += 1
        produce_retrying(producer, topic, value, key, poll_s=0.05, **kwargs)
        count += 1
    return count, dead_letters


class ExactlyOnceSink:
    """Callable for ``writeStream.foreachBatch``; see the module docstring for the protocol."""

    def __init__(
        self,
        settings: KafkaSettings,
        query_name: str,
        marker_topic: str,
        *,
        transaction_timeout: timedelta = timedelta(minutes=1),
        marker_timeout_s: float = 60.0,
        attempts: int = 5,
        fault_hook: FaultHook | None = None,
    ) -> None:
        self.settings = settings
        self.fault_hook = fault_hook
        self.query_name = query_name
        self.marker_topic = marker_topic
        self.transactional_id = owned_name(settings, f"eos-{query_name}")
        self.transaction_timeout = transaction_timeout
        self.marker_timeout_s = marker_timeout_s
        self.attempts = attempts  # per batch, in this process, before Spark fails the batch
        self._producer: Producer | None = None
        self._last_committed: int = -1
        self._query_id: str | None = None
        self._marker: Marker | None = None
        self._prepared = False  # fenced and read by prepare(), no query id adopted yet
        self._opening = threading.Lock()
        #: phases of the batch before its produce (collect, ...), for its "batch committed" log
        self._phases_before: dict[str, float] = {}
        self.last_written: tuple[int, collections.Counter] = (
            0,
            collections.Counter(),
        )  #: rows, dead letters
        self._committed = TRANSACTIONS.labels(query_name, "committed")
        self._aborted = TRANSACTIONS.labels(query_name, "aborted")
        self._fenced = FENCED.labels(query_name)
        self._skipped = SKIPPED.labels(query_name)

    def _fault(self, point: str, batch_id: int) -> None:
        if self.fault_hook is not None:
            self.fault_hook(point, batch_id)

    # ------------------------------------------------------------------ lifecycle
    @property
    def last_committed(self) -> int:
        return self._last_committed

    def prepare(self) -> None:
        """Fence and read the marker ahead of the first batch, while Spark starts (the runner
        calls it in a thread), so the first batch only compares query ids. Never raises: on
        failure the first batch's :meth:`open` does it all again."""
        try:
            with self._opening:
                self._fence_and_read()
                self._adopt(None)
                self._prepared = True
        except Exception as exc:
            self._reset()
            log.warning(
                "exactly-once sink not prepared ahead; the first batch opens it",
                extra={"query": self.query_name, "error": str(exc)},
            )

    def open(self, query_id: str | None = None) -> None:
        """Fence zombies, then learn the last committed batch. Order matters: reading the
        marker before ``init_transactions`` could miss a zombie's commit in flight. After
        :meth:`prepare` the fencing and the marker stand (nothing can commit for our
        transactional id since), so only the query id is compared."""
        with self._opening:
            if self._producer is not None and query_id == self._query_id:
                return
            if not (self._prepared and self._producer is not None):
                self._fence_and_read()
            self._prepared = False
            self._adopt(query_id)

    def _fence_and_read(self) -> None:
        self.close()
        self._producer = transactional_producer(
            self.settings,
            self.transactional_id,
            **{"transaction.timeout.ms": duration_ms(self.transaction_timeout)},
        )
        self._marker = read_marker(
            self.settings, self.marker_topic, self.query_name, self.marker_timeout_s
        )

    def _adopt(self, query_id: str | None) -> None:
        """The last committed batch of ``query_id`` by the marker last read."""
        marker = self._marker
        self._query_id = query_id
        if marker is None:
            self._last_committed = -1
        elif query_id is not None and marker.query_id is not None and marker.query_id != query_id:
            log.warning(
                "commit marker belongs to another query id (checkpoint replaced?): ignored",
                extra={
                    "query": self.query_name,
                    "marker_query_id": marker.query_id,
                    "query_id": query_id,
                    "marker_batch_id": marker.batch_id,
                },
            )
            self._last_committed = -1
        else:
            self._last_committed = marker.batch_id
        LAST_BATCH.labels(self.query_name).set(self._last_committed)
        log.info(
            "exactly-once sink ready",
            extra={
                "query": self.query_name,
                "transactional_id": self.transactional_id,
                "last_committed_batch": self._last_committed,
            },
        )

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(10)
            self._producer = None

    def _reset(self) -> None:
        """After a failed batch nothing in memory is trusted: the next batch re-fences and
        re-reads."""
        self._producer = None
        self._query_id = None
        self._prepared = False

    def note_phase(self, phase: str, seconds: float) -> None:
        """A phase of the coming batch before its produce (``collect``, or the driver state's
        ``state``): on /metrics now, in the batch's "batch committed" log line later."""
        PHASE_SECONDS.labels(self.query_name, phase).observe(seconds)
        self._phases_before[phase] = seconds

    # ------------------------------------------------------------------ foreachBatch
    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        query_id = batch_df.sparkSession.sparkContext.getLocalProperty("sql.streaming.queryId")
        self.open(query_id)
        if (
            batch_id <= self._last_committed
        ):  # decide before collecting: a skipped replay writes nothing
            # ... but its stateful operators still have to run and commit their state for this
            # batch (Spark 4.1 fails a batch whose state stores did not commit): the same state
            # again, as the replay is deterministic; its rows go nowhere.
            batch_df.write.format("noop").mode("overwrite").save()
            self.write_batch(batch_id, ())
            return
        started = time.perf_counter()
        table = batch_df.toArrow()
        # the whole plan runs here: read, state, Python
        self.note_phase("collect", time.perf_counter() - started)
        self.write_batch(batch_id, ArrowRows(table), rows_hint=table.num_rows)

    def write_batch(
        self,
        batch_id: int,
        rows: Iterable[OutputRow],
        *,
        rows_hint: int | None = None,
        query_id: str | None = None,
        always: bool = False,
    ) -> str:
        """Write one batch exactly once; returns "committed", "skipped" or "empty" (no rows:
        nothing written, unless ``always``: then the marker alone commits, for a batch that
        moved state the marker must name; ``spark_jobs.driver_state``). A Kafka
        error aborts the attempt and the batch is written again, up to ``attempts`` times; a
        fenced producer, any other error, or the last attempt's raises :class:`SinkError` and
        Spark fails the batch."""
        if self._producer is None or (query_id is not None and query_id != self._query_id):
            self.open(query_id if query_id is not None else self._query_id)
        if batch_id <= self._last_committed:
            self._skipped.inc()
            log.info(
                "batch already committed: skipped",
                extra={
                    "query": self.query_name,
                    "batch_id": batch_id,
                    "last_committed_batch": self._last_committed,
                },
            )
            return "skipped"
        if rows_hint == 0 and not always:
            EMPTY.labels(self.query_name).inc()
            return "empty"
        self._fault("before_produce", batch_id)
        query_id, rows = self._query_id, Replayable(rows)
        backoff = Backoff(initial_s=0.4, max_s=5)  # 0.4, 0.8, 1.6, ... s between attempts
        for attempt in range(1, self.attempts + 1):
            if self._producer is None:
                self.open(query_id)  # fences the old producer, then reads the marker again
                if batch_id <= self._last_committed:  # the failed attempt did commit
                    self._skipped.inc()
                    return "skipped"
            producer = self._producer
            assert producer is not None
            try:
                return self._commit_once(producer, batch_id, rows, always)
            except KafkaException as exc:
                error = exc.args[0] if exc.args else None
                not_committed = isinstance(error, KafkaError) and error.txn_requires_abort()
                self._abort(producer, not_committed, batch_id, exc)
                fenced = (
                    isinstance(error, KafkaError) and error.fatal()
                )  # another writer has our id: stop
                if fenced:
                    self._fenced.inc()
                if fenced or attempt == self.attempts:
                    raise SinkError(
                        f"batch {batch_id} of {self.query_name} not committed: {exc}"
                    ) from exc
                log.warning(
                    "batch attempt failed; writing it again",
                    extra={
                        "query": self.query_name,
                        "batch_id": batch_id,
                        "attempt": attempt,
                        "error": str(exc),
                        "outcome": "aborted"
                        if not_committed
                        else "unknown: re-fence and read the marker",
                    },
                )
                backoff.sleep()
            except Exception as exc:  # our own failure before the commit: certainly not committed
                self._abort(producer, True, batch_id, exc)
                raise SinkError(
                    f"batch {batch_id} of {self.query_name} not committed: {exc}"
                ) from exc
        raise AssertionError("unreachable")

    def _commit_once(
        self, producer: Producer, batch_id: int, rows: Iterable[OutputRow], always: bool = False
    ) -> str:
        """One transaction with the batch's rows and its marker, shown open on /metrics from
        its beginning to its end (the pipeline graph's open transaction)."""
        open_since = OPEN_SINCE.labels(self.query_name)
        open_since.set_to_current_time()
        try:
            return self._produce_and_commit(producer, batch_id, rows, always)
        finally:
            open_since.set(0)  # committed, aborted, or failed on to _abort

    def _produce_and_commit(
        self, producer: Producer, batch_id: int, rows: Iterable[OutputRow], always: bool = False
    ) -> str:
        """A retriable failure of the commit is retried as the same commit (its outcome may be
        unknown)."""
        started = time.perf_counter()
        producer.begin_transaction()
        count, dead_letters = produce_all(producer, rows)
        if count == 0 and not always:  # known only now without a hint: nothing to show
            producer.abort_transaction()
            EMPTY.labels(self.query_name).inc()
            return "empty"
        marker = {
            "batch_id": batch_id,
            "rows": count,
            "query_id": self._query_id,
            "committed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        produce_retrying(
            producer, self.marker_topic, json.dumps(marker).encode(), self.query_name.encode()
        )
        producer.flush()
        produced = time.perf_counter()
        PHASE_SECONDS.labels(self.query_name, "produce").observe(produced - started)
        self._fault("after_produce", batch_id)
        # Past the transaction timeout the broker aborts it anyway: the Kafka error is then
        # raised as it is, and write_batch treats it like any failed attempt.
        deadline = Deadline(self.transaction_timeout.total_seconds())
        backoff = Backoff(initial_s=0.2, max_s=0.2)
        while True:
            try:
                producer.commit_transaction()
                break
            except KafkaException as exc:
                if not exc.args[0].retriable() or deadline.expired():
                    raise
                log.warning(
                    "commit failed, retrying the same commit",
                    extra={
                        "query": self.query_name,
                        "batch_id": batch_id,
                        "error": str(exc.args[0]),
                    },
                )
                backoff.sleep()
        committed = time.perf_counter()
        PHASE_SECONDS.labels(self.query_name, "commit").observe(committed - produced)
        self._last_committed = batch_id
        self.last_written = (count, dead_letters)
        self._committed.inc()
        RECORDS.labels(self.query_name).inc(count)
        for reason, letters in dead_letters.items():
            DEAD_LETTERS.labels(self.query_name, reason).inc(letters)
        LAST_BATCH.labels(self.query_name).set(batch_id)
        log.info(
            "batch committed",
            extra={
                "query": self.query_name,
                "batch_id": batch_id,
                "rows": count,
                "seconds": round(committed - started, 4),
                "phases_s": {
                    **{name: round(v, 4) for name, v in self._phases_before.items()},
                    "produce": round(produced - started, 4),
                    "commit": round(committed - produced, 4),
                },
            },
        )
        self._phases_before = {}
        self._fault("after_commit", batch_id)
        return "committed"

    def _abort(
        self, producer: Producer, not_committed: bool, batch_id: int, exc: BaseException
    ) -> None:
        """After a failed attempt. Known not committed: abort and keep the producer. Otherwise
        the outcome is unknown (or the producer fenced): drop the producer; the next attempt's
        ``open`` fences it and reads the marker."""
        self._aborted.inc()
        log.error(
            "batch attempt aborted",
            extra={
                "query": self.query_name,
                "batch_id": batch_id,
                "error": str(exc),
                "not_committed": not_committed,
            },
        )
        if not_committed:
            try:
                producer.abort_transaction(30)
                return
            except KafkaException as abort_exc:
                log.error(
                    "abort failed",
                    extra={"query": self.query_name, "batch_id": batch_id, "error": str(abort_exc)},
                )
        self._reset()
