"""Running the real services as processes and reading back what they wrote.

Used by the stack tests, the benchmarks and the demo, so that all three exercise the services
exactly as a user runs them (``python -m <service>``), never an in-process shortcut.
"""
from __future__ import annotations

import collections
import dataclasses
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from streamkit.config import Settings
from streamkit.events import parse_row
from streamkit.topics import load_topic_specs, provision

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclasses.dataclass
class Lane:
    """A private set of topics and an MQTT prefix, so tests never see each other's data."""

    settings: Settings
    raw_topic: str
    dlq_topic: str
    prefix: str
    client_id: str


def new_lane(settings: Settings) -> Lane:
    tag = uuid.uuid4().hex[:10]
    declared = {s.name: s for s in load_topic_specs(settings.topic_partitions)}
    specs = [dataclasses.replace(declared["machinedata.raw"], name=f"test.raw.{tag}"),
             dataclasses.replace(declared["machinedata.dlq"], name=f"test.dlq.{tag}")]
    provision(settings, specs)
    return Lane(settings, specs[0].name, specs[1].name, f"test-{tag}", f"bridge-{tag}")


class Service:
    """A service started as `python -m <module>`; kill -9 and restart like a crash would."""

    def __init__(self, module: str, args: list[str], log: Path) -> None:
        self.module, self.args, self.log = module, args, log
        self.process: subprocess.Popen | None = None

    def start(self) -> "Service":
        handle = self.log.open("ab")
        self.process = subprocess.Popen([sys.executable, "-m", self.module, *self.args], cwd=REPO,
                                        stdout=handle, stderr=subprocess.STDOUT, env={**os.environ})
        return self

    def kill9(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def terminate(self, timeout_s: float = 30) -> int:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout_s)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


def bridge(lane: Lane, log: Path, *extra: str) -> Service:
    return Service("mqtt_bridge", ["--raw-topic", lane.raw_topic, "--dlq-topic", lane.dlq_topic,
                                   "--mqtt-topic-prefix", lane.prefix, "--mqtt-client-id", lane.client_id,
                                   "--metrics-port", str(free_port()), *extra], log)


def simulator(lane: Lane, events: Path, log: Path, *extra: str) -> Service:
    return Service("simulator", ["--input", str(events), "--mqtt-topic-prefix", lane.prefix, "--no-progress",
                                 "--metrics-port", str(free_port()), *extra], log)


def read_topic(settings: Settings, topic: str, timeout_s: float = 60) -> list:
    """Every message of every partition, up to the end offsets seen at the start."""
    consumer = Consumer({"bootstrap.servers": settings.bootstrap_servers, "group.id": f"read-{uuid.uuid4().hex}",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
    ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in partitions}
    pending = {p for p, end in ends.items() if end > 0}
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    messages = []
    deadline = time.monotonic() + timeout_s
    while pending and time.monotonic() < deadline:
        for message in consumer.consume(10000, 0.5):
            if message.error():
                continue
            messages.append(message)
            if message.offset() >= ends[message.partition()] - 1:
                pending.discard(message.partition())
    consumer.close()
    assert not pending, f"could not read {topic} to its end (partitions {pending})"
    return messages


def expected_records(events: Path) -> dict[bytes, float]:
    expected = {}
    with events.open("rb") as handle:
        for line in handle:
            if line.strip():
                row = parse_row(line)
                for quantity, value in row.quantities.items():
                    expected[f"{row.thing}|{quantity}|{row.timestamp_ms}".encode()] = value
    return expected


def wait_for_count(settings: Settings, topic: str, count: int, timeout_s: float) -> int:
    """Poll end offsets until the topic holds at least `count` records."""
    consumer = Consumer({"bootstrap.servers": settings.bootstrap_servers, "group.id": f"count-{uuid.uuid4().hex}"})
    partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
    deadline = time.monotonic() + timeout_s
    total = 0
    while time.monotonic() < deadline:
        total = sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions)
        if total >= count:
            break
        time.sleep(0.5)
    consumer.close()
    return total


def group_by_key(messages: list) -> dict[bytes, list[bytes]]:
    grouped: dict[bytes, list[bytes]] = collections.defaultdict(list)
    for message in messages:
        grouped[message.key()].append(message.value())
    return grouped
