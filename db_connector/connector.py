"""python -m db_connector: the pipeline's committed Kafka records -> InfluxDB points, exactly once.

Why the result in InfluxDB is exact:
- it reads with read_committed, so aborted Spark transactions never reach InfluxDB;
- every point's identity (measurement, tags, time) is derived from the record, so writing a
  record again overwrites its point (docs/influxdb-schema.md);
- Kafka offsets are committed only after InfluxDB acknowledged the batch holding them. A crash
  anywhere means the uncommitted records are read and written again: no loss, and thanks to
  the point identity, no duplicate;
- records that cannot become points, and points InfluxDB refuses, go to the dead-letter topic
  in one Kafka transaction with the offsets that pass them, so each is dead-lettered once.
While InfluxDB is unavailable the connector retries the same batch with back-off and pauses
its partitions: memory stays bounded by one batch, and nothing is skipped.
"""

from __future__ import annotations

import logging
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from prometheus_client import Counter, Gauge, Histogram

from db_connector.batch import Batch, write_now
from db_connector.committer import Committer
from db_connector.config import ConnectorSettings
from db_connector.dead_letters import count_committed, letters_for
from db_connector.errors import (
    ConsumerFailed,
    FencedOut,
    RewindFailed,
    TransactionStuck,
    WriteUnavailable,
)
from db_connector.influx_writer import InfluxWriter, Refused
from db_connector.points import Converter, converters_for, latency_references
from streamkit.cli import entry_point
from streamkit.deadline import Deadline
from streamkit.health import beat
from streamkit.kafka_clients import committed_consumer, record_position, transactional_producer
from streamkit.service import run_service
from streamkit.shutdown import ShutdownFlag

log = logging.getLogger("db_connector")

POINTS = Counter(
    "connector_points_written_total", "points acknowledged by InfluxDB", ["measurement"]
)
BATCH_SECONDS = Histogram(
    "connector_batch_seconds",
    "one batch: InfluxDB write(s) + Kafka commit",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)
RETRIES = Counter("connector_write_retries_total", "InfluxDB writes retried, by cause", ["cause"])
LAG = Gauge(
    "connector_consumer_lag_records", "records behind the end of the assigned partitions", ["topic"]
)
PENDING = Gauge("connector_pending_points", "points waiting to be written")
AVAILABLE = Gauge(
    "connector_influx_available",
    "1 while InfluxDB takes writes, 0 while the connector waits for it",
)
#: Finer from 10 s to 30 s too: an aggregate counted from its window's end (no closed_at_ms: a
#: record written before that field) waited its allowed lateness (10 s by default), so its latency
#: lands there.
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 12.5, 15, 20, 30, 60, 300)
EVENT_LATENCY = Histogram(
    "connector_event_latency_seconds",
    "event time -> acknowledged by InfluxDB: raw and joined points from their event time (a "
    "pair's: its later input's, when its partner exists), "
    "aggregates from when their window became closable (closed_at_ms: the key's event time "
    "that moved its horizon past the window's end), else (closed by the idle timeout) from "
    "their window's end, a session's last record (meaningful for live data, e.g. simulator "
    "--live)",
    ["measurement"],
    buckets=LATENCY_BUCKETS,
)
INGEST_LATENCY = Histogram(
    "connector_ingest_latency_seconds",
    "Kafka record timestamp (when its producer wrote it) -> acknowledged by InfluxDB",
    ["measurement"],
    buckets=LATENCY_BUCKETS,
)
#: Latencies are observed for a sample of each batch: enough for percentiles, cheap per point.
LATENCY_SAMPLES_PER_BATCH = 500
LATENCY_REFERENCES = latency_references()
REBALANCES = Counter(
    "connector_rebalances_total", "partition revocations (uncommitted work is re-read)"
)
LAG_EVERY_S = 2.0
#: How long the consumer may be without partitions after a revocation (or since it subscribed)
#: before its group membership counts as wedged: a rejoin takes a session timeout at most when a
#: peer died. After a broker pause librdkafka was seen to never send the rejoin again, and the
#: connector lived on reading nothing; a restart rejoins.
REJOIN_LIMIT_S = 120.0


class Connector:
    def __init__(self, settings: ConnectorSettings, shutdown: ShutdownFlag) -> None:
        self.settings = settings
        self.shutdown = shutdown
        kinds = [k.strip() for k in settings.topics.split(",") if k.strip()]
        self.converters: dict[str, tuple[Converter, str]] = converters_for(kinds, settings)
        self.writer = InfluxWriter(settings)
        # Static membership (the instance id): a restarted instance gets its partitions back at
        # once instead of waiting out the killed one's session timeout.
        self.consumer: Consumer = committed_consumer(
            settings,
            settings.group_id,
            **{"group.instance.id": settings.instance_id, "queued.max.messages.kbytes": 65536},
        )
        self.producer: Producer = transactional_producer(settings, settings.instance_id)
        self.committer = Committer(
            settings,
            self.consumer,
            self.producer,
            shutdown,
            self._wait,
            lambda: self.generation,
            lambda: self.carry.clear(),
        )
        self.generation = 0  # bumped on every revocation: older batches must not commit
        self.carry: list[Message] = []  # records polled while paused, first in the next batch
        self.paused = False
        self.write_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="influx-write")
        self.inflight: tuple[Batch, Future] | None = None
        self._lag_due = 0.0
        self.unassigned_since: float | None = time.monotonic()  # None while it has partitions
        AVAILABLE.set(1)

    # ------------------------------------------------------------------------- group membership
    def _on_assign(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        log.info(
            "partitions assigned",
            extra={"partitions": [f"{p.topic}[{p.partition}]" for p in partitions]},
        )
        self.unassigned_since = None
        if self.paused:  # keep the back-pressure while InfluxDB is away
            self.consumer.pause(partitions)

    def _on_revoke(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Eager rebalance: everything not committed is re-read by the next owner."""
        self.generation += 1
        self.carry.clear()
        self.unassigned_since = time.monotonic()
        REBALANCES.inc()
        log.info(
            "partitions revoked; uncommitted records will be re-read",
            extra={"partitions": len(partitions)},
        )

    def check_membership(self, now: float) -> None:
        """ConsumerFailed when the consumer has been without partitions for REJOIN_LIMIT_S (an
        empty assignment counts as one: a spare instance is a member)."""
        if self.unassigned_since is not None and now - self.unassigned_since > REJOIN_LIMIT_S:
            raise ConsumerFailed(
                f"no partitions assigned for {now - self.unassigned_since:.0f} s: the group "
                "membership is wedged"
            )

    # ------------------------------------------------------------------------- main loop
    def run(self) -> int:
        """Collect a batch while the previous one is being written (one write in flight, so
        memory holds at most two batches and commits stay in offset order)."""
        topics = list(self.converters)
        self.consumer.subscribe(topics, on_assign=self._on_assign, on_revoke=self._on_revoke)
        log.info(
            "connector running",
            extra={
                "topics": topics,
                "database": self.writer.database,
                "group": self.settings.group_id,
            },
        )
        batch = Batch(self.generation)
        flush_s = self.settings.flush_interval.total_seconds()
        try:
            while not self.shutdown.requested:
                messages, caught_up = self._take()
                self.check_membership(time.monotonic())
                beat()
                if batch.generation != self.generation:
                    batch = Batch(self.generation)
                self._check_errors(batch.add_chunk(messages, self.converters))
                PENDING.set(len(batch.lines))
                writing = self.inflight is not None and not self.inflight[1].done()
                ready = write_now(
                    batch,
                    writing=writing,
                    caught_up=caught_up,
                    batch_points=self.settings.batch_points,
                    flush_s=flush_s,
                )
                # settle when the next batch is ready, or as soon as the write is done (latency)
                if ready or (self.inflight is not None and self.inflight[1].done()):
                    if not self._settle():
                        self._read_again()
                        batch = Batch(self.generation)
                        continue
                    if ready:
                        self._submit(batch)
                        batch = Batch(self.generation)
                self._update_lag()
            if self._settle() and len(batch) and batch.generation == self.generation:
                log.info(
                    "shutting down: writing and committing the last batch",
                    extra={"records": len(batch)},
                )
                self._submit(batch)
                self._settle()
        except FencedOut as exc:
            log.error(
                "another connector took over this transactional id; exiting",
                extra={"error": str(exc)},
            )
            return 1
        except RewindFailed as exc:
            log.error(
                "could not rewind to the committed offsets; exiting", extra={"error": str(exc)}
            )
            return 1
        except ConsumerFailed as exc:
            log.error(
                "the Kafka consumer failed for good; exiting so a restart rejoins the group",
                extra={"error": str(exc)},
            )
            return 1
        except TransactionStuck as exc:
            log.error(
                "a transaction step keeps failing; exiting so a restart fences this producer",
                extra={"error": str(exc)},
            )
            return 1
        finally:
            self._close()
        return 0

    def _take(self) -> tuple[list[Message], bool]:
        """The next records, and whether the consumer has caught up (fewer came than asked for
        within the poll's wait)."""
        if self.carry:
            taken, self.carry = self.carry, []
            return taken, False
        wanted = max(1, min(10000, self.settings.batch_points))
        try:
            messages = self.consumer.consume(
                wanted, min(0.1, self.settings.flush_interval.total_seconds())
            )
        except KafkaException as exc:
            if not exc.args[0].retriable():
                raise ConsumerFailed(str(exc.args[0])) from exc  # exit non-zero: a restart rejoins
            log.warning("consume failed, retrying", extra={"error": str(exc.args[0])})
            return [], False
        return messages, len(messages) < wanted

    @staticmethod
    def _check_errors(errors: list[KafkaError]) -> None:
        """Errors the consumer reports in-band. A fatal one (e.g. a static member fenced after
        the broker was unreachable past the session timeout) means the consumer will never
        deliver again: exit instead of living on idle."""
        for error in errors:
            if error.code() == KafkaError._PARTITION_EOF:
                continue
            # a fatal error: librdkafka reports it as _FATAL
            if error.fatal() or error.code() == KafkaError._FATAL:
                raise ConsumerFailed(str(error))
            log.warning("consumer error", extra={"error": str(error)})

    # ------------------------------------------------------------------------- one batch
    def _submit(self, batch: Batch) -> None:
        batch.submitted = time.monotonic()
        self.inflight = (batch, self.write_thread.submit(self.writer.write, batch.lines))

    def _settle(self) -> bool:
        """Finish the batch in flight: its write (retried while InfluxDB is away), its dead
        letters and its offsets. False when it could not be committed (shutdown meanwhile, the
        partitions moved, a failed commit): then no later batch may commit before it is read
        again, or its records would be skipped."""
        if self.inflight is None:
            return True
        batch, write = self.inflight
        self.inflight = None
        try:
            refused: list[Refused] | None = write.result()
            AVAILABLE.set(1)
        except WriteUnavailable as exc:
            refused = self._write_until_done(batch, exc)
        if refused is None:
            return False  # shutdown or rebalance while InfluxDB was away: nothing committed
        dead, written = letters_for(batch, refused, self.converters, self.settings.dlq_topic)
        if not self.committer.commit(batch, dead):
            return False
        for measurement, count in written.items():
            POINTS.labels(measurement).inc(count)
        count_committed(dead)
        BATCH_SECONDS.observe(time.monotonic() - batch.submitted)
        self._observe_latency(batch)
        return True

    def _read_again(self) -> None:
        """The batch in flight was not committed (a failed commit, a rebalance meanwhile, or
        shutdown): it and the batch collected meanwhile are dropped, so every partition goes
        back to its committed offset. Whatever the reason: after a rebalance the batch collected
        meanwhile holds records of the new assignment, read from its committed offsets, and
        dropping them without a rewind let a later commit pass records never written."""
        if not self.shutdown.requested:
            self.committer.rewind()

    def _observe_latency(self, batch: Batch) -> None:
        """Only the sampled points pay: their reference time is read back from their line."""
        now_ms = time.time() * 1000
        stride = max(1, len(batch.lines) // LATENCY_SAMPLES_PER_BATCH)
        for index in range(0, len(batch.lines), stride):
            message = batch.origins[index]
            measurement = self.converters[record_position(message)[0]][1]
            INGEST_LATENCY.labels(measurement).observe(
                max(0.0, now_ms - message.timestamp()[1]) / 1000
            )
            reference = LATENCY_REFERENCES.get(measurement)
            if reference is not None:
                EVENT_LATENCY.labels(measurement).observe(
                    max(0.0, now_ms - reference(batch.lines[index])) / 1000
                )

    def _write_until_done(self, batch: Batch, error: WriteUnavailable) -> list[Refused] | None:
        """Retry the batch until InfluxDB answers; None if we stopped waiting (shutdown,
        or the partitions went to another member meanwhile)."""
        backoff = self.settings.write_backoff()
        while True:
            delay = backoff.next_delay()
            RETRIES.labels(error.cause).inc()
            AVAILABLE.set(0)
            log.warning(
                "InfluxDB unavailable; pausing consumption and retrying",
                extra={
                    "cause": error.cause,
                    "error": str(error)[:300],
                    "retry_in_s": round(delay, 2),
                    "pending_points": len(batch.lines),
                },
            )
            self._pause()
            if self._wait(delay) or batch.generation != self.generation:
                # a write of a later batch pauses again if InfluxDB is still away
                self._resume("batch dropped while InfluxDB was away; consumption resumed")
                return None
            try:
                refused = self.writer.write(batch.lines)
            except WriteUnavailable as again:
                error = again
                continue
            AVAILABLE.set(1)
            self._resume("InfluxDB available again; consumption resumed")
            return refused

    def _wait(self, seconds: float) -> bool:
        """Back-off that keeps serving the group (poll) and wakes on shutdown."""
        deadline = Deadline(seconds)
        while not deadline.expired():
            if self.shutdown.requested:
                return True
            try:
                message = self.consumer.poll(min(0.2, deadline.remaining()))
            except KafkaException as exc:  # a back-off must not fail what it is waiting for
                if not exc.args[0].retriable():
                    raise ConsumerFailed(str(exc.args[0])) from exc
                time.sleep(0.05)
                continue
            if message is not None:
                self.carry.append(message)  # fetched before the pause took effect: keep it
        return self.shutdown.requested

    def _pause(self) -> None:
        if not self.paused:
            self.consumer.pause(self.consumer.assignment())
            self.paused = True

    def _resume(self, why: str) -> None:
        if self.paused:
            self.consumer.resume(self.consumer.assignment())
            self.paused = False
            log.info(why)

    # ------------------------------------------------------------------------- housekeeping
    def _update_lag(self) -> None:
        now = time.monotonic()
        if now < self._lag_due:
            return
        self._lag_due = now + LAG_EVERY_S
        lag: dict[str, int] = {topic: 0 for topic in self.converters}
        try:
            for position in self.consumer.position(self.consumer.assignment()):
                _low, high = self.consumer.get_watermark_offsets(position, cached=True)
                if high >= 0 and position.offset >= 0:
                    lag[position.topic] += max(0, high - position.offset)
        except KafkaException:
            return
        for topic, value in lag.items():
            LAG.labels(topic).set(value)

    def _close(self) -> None:
        try:
            self.consumer.close()
        except (KafkaException, RuntimeError) as exc:
            log.warning("consumer close failed", extra={"error": str(exc)})
        self.producer.flush(10)
        self.write_thread.shutdown(wait=True)
        self.writer.close()
        log.info("connector stopped")


@entry_point("db_connector")
def main(argv: list[str] | None = None) -> int:
    return run_service(
        "db_connector",
        ConnectorSettings,
        __doc__,
        argv,
        lambda settings, shutdown: Connector(settings, shutdown).run(),
    )


if __name__ == "__main__":
    sys.exit(main())
