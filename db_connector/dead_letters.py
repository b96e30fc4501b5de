"""The connector's dead letters: records that cannot become points, and points InfluxDB
refused. They go to the dead-letter topic in the transaction that commits the offsets passing
them (see committer.py), so each is dead-lettered exactly once. What a dead letter is (its
headers, its reasons) is the wire contract's (:mod:`streamkit.wire.dead_letters`); this module
only adapts it to the connector's batches."""

from __future__ import annotations

import collections
import logging

from confluent_kafka import Producer
from prometheus_client import Counter

from db_connector.batch import Batch, DeadLetter
from db_connector.influx_writer import Refused, dead_letter_reason
from db_connector.points import Converter
from streamkit.kafka_clients import produce_retrying, record_position
from streamkit.wire import dead_letters as wire_dead_letters

log = logging.getLogger("db_connector")

REJECTED = Counter(
    "connector_rejected_points_total", "points InfluxDB refused (dead-lettered)", ["measurement"]
)
DEAD_LETTERS = Counter(
    "connector_dead_letters_total", "records sent to the dead-letter topic, by reason", ["reason"]
)


def letters_for(
    batch: Batch,
    refused: list[Refused],
    converters: dict[str, tuple[Converter, str]],
    dlq_topic: str,
) -> tuple[list[DeadLetter], collections.Counter]:
    """The batch's dead letters (its unconvertible records, then its refused points) and the
    points written per measurement once the refused ones are taken off."""
    dead = list(batch.dead)
    written = batch.points_per_measurement(converters)
    for item in refused:
        message = batch.origins[item.index]
        topic = record_position(message)[0]
        measurement = converters[topic][1]
        written[measurement] -= 1
        REJECTED.labels(measurement).inc()
        if topic == dlq_topic:
            # never dead-letter a dead letter: that could loop; it is logged and counted
            log.error("InfluxDB refused a dead-letter point", extra={"reason": item.reason})
            continue
        dead.append(DeadLetter(message, dead_letter_reason(item.reason), item.reason))
    return dead, written


def count_committed(dead: list[DeadLetter]) -> None:
    """Counted only once committed: an aborted transaction dead-lettered nothing."""
    for letter in dead:
        DEAD_LETTERS.labels(letter.reason).inc()


def produce_dead_letter(producer: Producer, dlq_topic: str, letter: DeadLetter) -> None:
    """The record's own key and bytes, and headers saying why and where it came from; a full
    local queue is waited out (it empties as the producer sends), never an error."""
    source = letter.message
    headers = wire_dead_letters.record_headers(
        letter.reason,
        letter.detail,
        *record_position(source),
        len(source.value() or b""),
    )
    produce_retrying(producer, dlq_topic, source.value(), source.key(), headers=headers)
    log.warning(
        "dead-lettered a record",
        extra={
            "reason": letter.reason,
            "detail": letter.detail[:200],
            "topic": source.topic(),
            "offset": source.offset(),
        },
    )
