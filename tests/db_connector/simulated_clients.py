"""In-memory stand-ins for the connector's Kafka consumer and producer and its InfluxDB writer,
with faults drawn from a seeded RNG: rebalances served inside consume/poll (as librdkafka
serves them), failed offset commits and transactions, InfluxDB outages. They keep the one
thing the oracle needs: which records InfluxDB acknowledged and which offsets and dead letters
were committed. A model of the client contract only, for the connector's loop; the real
servers are in tests/end_to_end and tests/db_connector/test_connector_stack.py."""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition

from db_connector.errors import WriteUnavailable
from db_connector.influx_writer import Refused
from db_connector.lineprotocol import PointError
from streamkit.wire.dead_letters import SOURCE, SOURCE_OFFSET, SOURCE_PARTITION
from tests.support.faults import kafka_error

POISON = b"poison"


@dataclass(frozen=True)
class Record:
    """What the connector reads of a consumed message."""

    _topic: str
    _partition: int
    _offset: int
    _value: bytes

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def value(self) -> bytes:
        return self._value

    def key(self) -> bytes:
        return b"k"

    def error(self) -> None:
        return None

    def timestamp(self) -> tuple[int, int]:
        return (1, 0)

    def headers(self) -> list:
        return []


def line_of(message: Record) -> str:
    """The converter: a line naming the record; poison becomes a dead letter."""
    if message.value() == POISON:
        raise PointError("undecodable", "poison")
    return f"{message.topic()}/{message.partition()}/{message.offset()}"


@dataclass
class Broker:
    """The log, the group's committed offsets and the committed dead letters."""

    log: dict[tuple[str, int], list[Record]]
    committed: dict[tuple[str, int], int] = field(default_factory=dict)
    dead_letters: Counter = field(default_factory=Counter)
    written: set[str] = field(default_factory=set)

    def commit(self, offsets: list[TopicPartition]) -> None:
        self.committed.update({(o.topic, o.partition): o.offset for o in offsets})

    def all_committed(self) -> bool:
        return all(self.committed.get(tp, 0) == len(records) for tp, records in self.log.items())


class SimulatedConsumer:
    def __init__(
        self,
        broker: Broker,
        rng: random.Random,
        rebalance_rate: float,
        commit_fault_rate: float,
        on_idle: Callable[[], None],
    ) -> None:
        self.broker, self.rng = broker, rng
        self.rebalance_rate, self.commit_fault_rate = rebalance_rate, commit_fault_rate
        self.on_idle = on_idle
        self.positions: dict[tuple[str, int], int] = {}
        self.paused: set[tuple[str, int]] = set()
        self.callbacks: tuple[Any, Any] = (None, None)  # on_assign, on_revoke once subscribed
        self.calls = 0
        self.rebalances_left = 10  # bounded: the loop must be able to finish a batch between two

    # group membership
    def subscribe(self, _topics: list[str], on_assign: Any, on_revoke: Any) -> None:
        self.callbacks = (on_assign, on_revoke)
        self._assign()

    def _assign(self) -> None:
        self.positions = {tp: self.broker.committed.get(tp, 0) for tp in self.broker.log}
        self.paused.clear()
        self.callbacks[0](self, self.assignment())

    def _serve_group(self) -> None:
        """A rebalance (eager: revoke all, then assign from the committed offsets) at random."""
        self.calls += 1
        if self.calls > 200_000:
            raise AssertionError("the connector never finished: a live loop that does nothing")
        if self.rebalances_left and self.rng.random() < self.rebalance_rate:
            self.rebalances_left -= 1
            self.callbacks[1](self, self.assignment())
            self._assign()

    def assignment(self) -> list[TopicPartition]:
        return [TopicPartition(topic, partition) for topic, partition in self.positions]

    # reading
    def consume(self, num_messages: int, _timeout: float) -> list[Record]:
        self._serve_group()
        taken: list[Record] = []
        readable = [tp for tp in self.positions if tp not in self.paused]
        self.rng.shuffle(readable)
        for tp in readable:
            chunk = self.broker.log[tp][
                self.positions[tp] : self.positions[tp] + self.rng.randint(1, 40)
            ]
            chunk = chunk[: num_messages - len(taken)]
            taken.extend(chunk)
            self.positions[tp] += len(chunk)
        if not taken:
            if self.broker.all_committed():
                self.on_idle()
            time.sleep(0.0005)  # a real consume waits for records: the write thread gets its turn
        return taken

    def poll(self, timeout: float) -> Record | None:
        taken = self.consume(1, timeout)
        return taken[0] if taken else None

    def pause(self, partitions: list[TopicPartition]) -> None:
        self.paused.update((p.topic, p.partition) for p in partitions)

    def resume(self, partitions: list[TopicPartition]) -> None:
        self.paused.difference_update((p.topic, p.partition) for p in partitions)

    def seek(self, partition: TopicPartition) -> None:
        offset = partition.offset
        self.positions[(partition.topic, partition.partition)] = (
            0 if offset == OFFSET_BEGINNING else offset
        )

    # offsets
    def commit(self, offsets: list[TopicPartition], asynchronous: bool = False) -> None:
        if self.rng.random() < self.commit_fault_rate:
            kind = self.rng.choice(["retriable", "non_retriable", "stale"])
            if kind == "stale":  # refused after a rebalance
                raise KafkaException(
                    KafkaError(KafkaError.ILLEGAL_GENERATION, "simulated commit fault")
                )
            raise kafka_error(kind, "commit")
        self.broker.commit(offsets)

    def committed(self, partitions: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        return [
            TopicPartition(
                p.topic, p.partition, self.broker.committed.get((p.topic, p.partition), -1001)
            )
            for p in partitions
        ]

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        return [
            TopicPartition(p.topic, p.partition, self.positions[(p.topic, p.partition)])
            for p in partitions
        ]

    def get_watermark_offsets(
        self, partition: TopicPartition, cached: bool = True
    ) -> tuple[int, int]:
        return 0, len(self.broker.log[(partition.topic, partition.partition)])

    def consumer_group_metadata(self) -> object:
        return object()

    def close(self) -> None:
        pass


class SimulatedProducer:
    """A transactional producer: dead letters and offsets become visible together at commit."""

    def __init__(self, broker: Broker, rng: random.Random, fault_rate: float) -> None:
        self.broker, self.rng, self.fault_rate = broker, rng, fault_rate
        self.letters: list[
            tuple[str, int, int]
        ] = []  # the dead-lettered records' (topic, partition, offset)
        self.offsets: list[TopicPartition] = []
        self.open = False

    def _maybe_fail(self, step: str) -> None:
        if self.rng.random() < self.fault_rate:
            raise kafka_error(self.rng.choice(["retriable", "non_retriable", "abortable"]), step)

    def begin_transaction(self) -> None:
        self._maybe_fail("begin")
        self.open, self.letters, self.offsets = True, [], []

    def produce(self, _topic: str, **kwargs: Any) -> None:
        headers = dict(kwargs["headers"])
        self.letters.append(
            (headers[SOURCE].decode(), int(headers[SOURCE_PARTITION]), int(headers[SOURCE_OFFSET]))
        )

    def send_offsets_to_transaction(
        self, offsets: list[TopicPartition], _metadata: object, _timeout: float
    ) -> None:
        self._maybe_fail("send_offsets")
        self.offsets = list(offsets)

    def commit_transaction(self, _timeout: float) -> None:
        self._maybe_fail("commit")
        if not self.open:
            raise KafkaException(KafkaError(KafkaError._STATE, "no transaction"))
        self.broker.commit(self.offsets)
        self.broker.dead_letters.update(self.letters)
        self.open = False

    def abort_transaction(self, _timeout: float) -> None:
        if not self.open:
            raise KafkaException(
                KafkaError(KafkaError._STATE, "Operation not valid in state Ready")
            )
        self.open = False

    def poll(self, _timeout: float) -> int:
        return 0

    def flush(self, _timeout: float) -> int:
        return 0


class SimulatedInflux:
    database = "simulated"

    def __init__(self, broker: Broker, rng: random.Random, outage_rate: float) -> None:
        self.broker, self.rng, self.outage_rate = broker, rng, outage_rate

    def write(self, lines: list[str]) -> list[Refused]:
        draw = self.rng.random()
        if draw < self.outage_rate:
            raise WriteUnavailable("connection", "simulated outage")
        self.broker.written.update(lines)
        if draw < 2 * self.outage_rate:  # written, but the answer was lost
            raise WriteUnavailable("connection", "simulated unknown outcome")
        return []

    def close(self) -> None:
        pass
