"""The unit of work of the connector: consecutive records, their points and their offsets.

A batch is written to InfluxDB as a whole and its offsets are committed as a whole, after the
write was acknowledged; so whatever happens in between, the records of an uncommitted batch
are read again and rewritten (points are idempotent), never skipped.
"""
from __future__ import annotations

import collections
import time
from dataclasses import dataclass, field

from confluent_kafka import Message, TopicPartition

from db_connector.lineprotocol import PointError
from db_connector.points import Converter


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
    first_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    next_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    per_measurement: collections.Counter = field(default_factory=collections.Counter)
    started: float = field(default_factory=time.monotonic)

    def add(self, message: Message, convert: Converter, measurement: str) -> None:
        position = (message.topic(), message.partition())
        offset = message.offset()
        self.first_offsets.setdefault(position, offset)
        self.next_offsets[position] = offset + 1
        try:
            point = convert(message)
        except PointError as exc:
            self.dead.append(DeadLetter(message, exc.reason, str(exc)))
            return
        self.lines.append(point)
        self.origins.append(message)
        self.per_measurement[measurement] += 1

    def __len__(self) -> int:
        return len(self.next_offsets) and len(self.lines) + len(self.dead)

    def offsets(self) -> list[TopicPartition]:
        """What to commit: the offset after the last record of each partition."""
        return [TopicPartition(topic, partition, offset) for (topic, partition), offset in self.next_offsets.items()]

    def age_s(self) -> float:
        return time.monotonic() - self.started
