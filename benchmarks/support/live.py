"""Live traffic for a benchmark's private topics: rows written at a steady rate stamped with the
wall clock, as the bridge writes them, and a reader of what is committed as it grows."""

from __future__ import annotations

import threading
import time
import uuid

from confluent_kafka import Consumer

from mqtt_bridge.records import RowSplitter
from simulator.generate import generate
from stacktools.stack.settings import Settings
from streamkit.events import validate
from streamkit.kafka_clients import client_config, idempotent_producer


class LiveFeed(threading.Thread):
    """Generated rows at a steady rate, each stamped with the wall clock when written."""

    def __init__(
        self, settings: Settings, topic: str, partitions: int, rate: float, things: int
    ) -> None:
        super().__init__(daemon=True)
        self.settings, self.topic, self.rate, self.things = settings, topic, rate, things
        self.splitter = RowSplitter(partitions)
        self.stop = threading.Event()
        self.records = 0

    def run(self) -> None:
        producer = idempotent_producer(self.settings, "bench-batches-feed", **{"linger.ms": 5})
        started, sent = time.monotonic(), 0
        for obj in generate(10**9, self.things, seed=7):
            if self.stop.is_set():
                break
            wait = started + sent / self.rate - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            obj["Timestamp"] = int(time.time() * 1000)
            for record in self.splitter.split(validate(obj)):
                producer.produce(self.topic, record.value, record.key, partition=record.partition)
                self.records += 1
            producer.poll(0)
            sent += 1
        producer.flush(30)


def committed_tail(settings: Settings, role: str, topic: str, start: str) -> Consumer:
    """A group-less reader of what is committed to ``topic`` as it grows, from ``start``
    (earliest or latest), fetching without waiting: a latency probe's own wait stays small."""
    consumer = Consumer(
        {
            **client_config(settings, role),
            "group.id": uuid.uuid4().hex,
            "isolation.level": "read_committed",
            "auto.offset.reset": start,
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 10,
        }
    )
    consumer.subscribe([topic])
    return consumer
