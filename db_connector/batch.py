"""The unit of work of the connector: consecutive records, their points and their offsets.

A batch is written to InfluxDB as a whole and its offsets are committed as a whole, after the
write was acknowledged; so whatever happens in between, the records of an uncommitted batch
are read again and rewritten (points are idempotent), never skipped.
"""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass, field
from typing import Protocol

from confluent_kafka import KafkaError, Message, TopicPartition

from db_connector.lineprotocol import PointError
from db_connector.points import Converter
from streamkit.kafka_clients import record_position


@dataclass(frozen=True)
class DeadLetter:
    message: Message
    reason: str
    detail: str


@dataclass
class Batch:
    generation: int
    lines: list[str] = field(default_factory=list)
    origins: list[Message] = field(default_factory=list)
    dead: list[DeadLetter] = field(default_factory=list)
    next_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)
    submitted: float = 0.0

    def add_chunk(
        self, messages: list[Message], converters: dict[str, tuple[Converter, str]]
    ) -> list[KafkaError]:
        """Convert a consumed chunk; returns the consumer errors among it. The per-record work
        here is the connector's hot loop, hence the local names."""
        lines, origins, dead = self.lines, self.origins, self.dead
        following = self.next_offsets
        errors: list[KafkaError] = []
        for message in messages:
            error = message.error()
            if error is not None:
                errors.append(error)
                continue
            topic, partition, offset = record_position(message)
            following[topic, partition] = offset + 1
            try:
                lines.append(converters[topic][0](message))
            except PointError as exc:
                dead.append(DeadLetter(message, exc.reason, str(exc)))
                continue
            origins.append(message)
        return errors

    def points_per_measurement(
        self, converters: dict[str, tuple[Converter, str]]
    ) -> collections.Counter:
        by_topic = collections.Counter(record_position(message)[0] for message in self.origins)
        return collections.Counter(
            {converters[topic][1]: count for topic, count in by_topic.items()}
        )

    def __len__(self) -> int:
        return len(self.lines) + len(self.dead)

    def offsets(self) -> list[TopicPartition]:
        """What to commit: the offset after the last record of each partition."""
        return [
            TopicPartition(topic, partition, offset)
            for (topic, partition), offset in self.next_offsets.items()
        ]

    def age_s(self) -> float:
        return time.monotonic() - self.started


class Pending(Protocol):
    """What the write policy looks at in a batch: its size and its age."""

    def __len__(self) -> int: ...

    def age_s(self) -> float: ...


def write_now(
    batch: Pending, *, writing: bool, caught_up: bool, batch_points: int, flush_s: float
) -> bool:
    """Whether to write the points collected so far: a full batch, one that has waited the flush
    interval, or, when no write is in flight, any batch as soon as the consumer has caught up.
    A burst (a Spark batch's transaction becoming readable at once) is then written when it has
    been read, not one flush interval after its first record; under load a write is in flight
    most of the time and points keep gathering into bigger batches."""
    if not len(batch):
        return False
    return len(batch) >= batch_points or batch.age_s() >= flush_s or (caught_up and not writing)
