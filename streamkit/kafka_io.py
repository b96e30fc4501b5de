"""Reading Kafka topics back: to their end, or until they hold enough records. Used by the
tools, the benchmarks and the tests to see what a stage committed."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from streamkit.config import KafkaSettings
from streamkit.deadline import Backoff, Deadline, TimedOut, wait_until
from streamkit.kafka_clients import client_config

#: Errors a loaded broker answers with for a while (seen: multi-second controller stalls on 2
#: cores).
TRANSIENT_CODES = {
    KafkaError._TIMED_OUT,
    KafkaError._TRANSPORT,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError._ALL_BROKERS_DOWN,
    # a group coordinator moving or still loading its offsets (a broker just started)
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    # a broker's handle dropped while the cluster's metadata changed (a node left or came back)
    KafkaError._DESTROY_BROKER,
    # a partition's new leader whose high watermark has not caught up yet (just elected)
    KafkaError.OFFSET_NOT_AVAILABLE,
}


#: How long a partition's leader waits for a follower before dropping it from the ISR (the
#: brokers' ``replica.lag.time.max.ms``, written from here). A new leader whose follower died
#: answers OFFSET_NOT_AVAILABLE until then: its high watermark waits on that follower.
REPLICA_LAG_MAX_S = 30.0

#: How long a broker may miss its heartbeats before the controller fences it and moves its
#: partitions' leadership (the brokers' ``broker.session.timeout.ms``, written from here).
BROKER_SESSION_S = 9.0

#: What a look at the cluster retries through: a follower dropped from the ISR, plus a leader
#: election and a loaded controller's stall on top.
LEADER_CHANGE_S = 2 * REPLICA_LAG_MAX_S


def transient(exc: KafkaException) -> bool:
    error = exc.args[0]
    return error.retriable() or error.code() in TRANSIENT_CODES


T = TypeVar("T")


def _reader_config(settings: KafkaSettings, role: str) -> dict:
    return {
        **client_config(settings, role),
        "group.id": f"{role}-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
    }


def end_offsets(
    settings: KafkaSettings, topic: str, *, role: str = "end-offsets", strict: bool = False
) -> dict[int, int]:
    """One look at every partition's end offset (read_uncommitted, the *high watermark*).
    ``strict``: a topic the broker reports an error for (missing, not authorised) raises
    instead of reading as a topic without partitions."""
    probe = Consumer({**_reader_config(settings, role), "isolation.level": "read_uncommitted"})
    try:
        metadata = probe.list_topics(topic, timeout=30).topics[topic]
        if strict and metadata.error is not None:
            raise KafkaException(metadata.error)
        return {
            p: probe.get_watermark_offsets(TopicPartition(topic, p), timeout=30, cached=False)[1]
            for p in metadata.partitions
        }
    finally:
        probe.close()


def retry_transient(
    call: Callable[[], T], within_s: float = LEADER_CHANGE_S, backoff: Backoff | None = None
) -> T:
    """``call()``, tried again after a back-off while Kafka answers with a transient error (a
    loaded or just started broker, a leader change), for at most ``within_s`` seconds."""
    deadline = Deadline(within_s)
    backoff = backoff or Backoff(initial_s=1.0)
    while True:
        try:
            return call()
        except KafkaException as exc:
            if deadline.expired() or not transient(exc):
                raise
            backoff.sleep(deadline)


def high_watermarks(
    settings: KafkaSettings, topic: str, within_s: float = LEADER_CHANGE_S
) -> dict[int, int]:
    """End offsets (read_uncommitted) of every partition, retried over transient errors."""
    return retry_transient(partial(end_offsets, settings, topic), within_s)


def read_up_to(
    settings: KafkaSettings,
    topic: str,
    ends: dict[int, int],
    *,
    isolation: str = "read_committed",
    timeout_s: float = 60,
    role: str = "read-to-end",
    overrides: dict[str, Any] | None = None,
) -> Iterator[Message]:
    """Every record of each partition up to its offset in ``ends``, as it arrives (a caller
    looking for one record need not hold them all); :class:`TimedOut` if a partition does not
    get there within ``timeout_s`` (with read_committed: a transaction left open).
    ``overrides``: consumer settings of a caller reading much (e.g. larger fetches)."""
    pending = {p for p, end in ends.items() if end > 0}
    if not pending:
        return
    consumer = Consumer(
        {**_reader_config(settings, role), "isolation.level": isolation, **(overrides or {})}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in pending])
    deadline = Deadline(timeout_s)
    try:
        while pending and not deadline.expired():
            yield from (m for m in consumer.consume(5000, 0.3) if m.error() is None)
            for position in consumer.position([TopicPartition(topic, p) for p in list(pending)]):
                if position.offset >= ends[position.partition]:
                    pending.discard(position.partition)
    finally:
        consumer.close()
    if pending:
        raise TimedOut(
            f"reading {topic} to its end: partitions {sorted(pending)} not within {timeout_s:g} s"
        )


def read_to_end(
    settings: KafkaSettings, topic: str, isolation: str = "read_committed", timeout_s: float = 60
) -> list[Message]:
    """Every record up to the *high watermark* of each partition at call time.

    Not up to the last message offset (a transactional topic ends with a control record) and
    not up to the last stable offset (an open transaction elsewhere hides committed records
    behind it): position >= high watermark is the only end that is certain.
    """
    return list(
        read_up_to(
            settings,
            topic,
            high_watermarks(settings, topic),
            isolation=isolation,
            timeout_s=timeout_s,
        )
    )


def record_count(settings: KafkaSettings, topic: str) -> int:
    """Records in the topic by end offsets (transaction markers included)."""
    return sum(high_watermarks(settings, topic).values())


def wait_for_count(settings: KafkaSettings, topic: str, count: int, timeout_s: float) -> int:
    """Until the topic holds at least ``count`` records (by end offsets); the count reached."""
    reached = [0]

    def enough() -> bool:
        reached[0] = record_count(settings, topic)
        return reached[0] >= count

    try:
        wait_until(enough, timeout_s, f"{count} records in {topic}", interval_s=0.5)
    except TimedOut:
        pass
    return reached[0]
