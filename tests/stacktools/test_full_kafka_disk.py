"""Kafka's disk filling up under a producer that writes as the bridge does, on a filesystem this
test makes (a small tmpfs under a Kafka node's data directory).

A broker whose only log directory fails shuts down ("all log dirs have failed"): a full disk
stops the node, it does not refuse writes. The disk alert's condition holds on the stack's own
Prometheus meanwhile, the producer keeps its records (none fails), and once space is back the
node is started again on its own (the launcher's disk reporter runs `stack up kafka`; compose's
restart policy starts it). The broker recovers its logs and every record is in the topic
exactly once: those it had before the disk filled, the one batch it may have half-written, and
those that waited.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError

from stacktools.stack.process import ManagedProcess
from stacktools.stack.servers.kafka import kafka_nodes
from stacktools.stack.settings import Settings
from streamkit.deadline import wait_until
from streamkit.kafka_clients import idempotent_producer
from streamkit.kafka_io import read_to_end
from tests.support.full_disk import (
    fill,
    private_server,
    resuming,
    small_run_dir,
    wait_for_the_alert,
    wait_resumed,
    watched,
)
from tests.support.ports import free_ports

pytestmark = pytest.mark.stack
#: Room for the node's metadata and the records before the disk is filled, several times over.
DISK = "64m"
TOPIC = "machinedata.raw"
#: Records written before the disk fills, and while it is full.
BEFORE, WHILE_FULL = 5_000, 5_000


@pytest.fixture
def small_kafka(stack_settings: Settings, tmp_path: Path) -> Iterator[Settings]:
    """A Kafka node of its own, its data on a small tmpfs, whose clients log in as the
    stack's do."""
    run = tmp_path / "run"
    with small_run_dir(stack_settings, run, "kafka", DISK):
        kafka, controller = free_ports(2)
        ports = {"KAFKA_PORT": kafka, "KAFKA_CONTROLLER_PORT": controller}
        with private_server(stack_settings, run, "kafka", ports) as settings:
            yield settings


def record(n: int) -> tuple[bytes, bytes]:
    return f"key-{n:06d}".encode(), f"value-{n:06d}-".encode() + b"x" * 500


def test_a_full_kafka_disk_stops_the_node_and_once_it_has_room_every_record_is_there_once(
    stack_settings: Settings, small_kafka: Settings, tmp_path: Path
) -> None:
    settings = small_kafka
    reporter_log = tmp_path / "disk-space.log"
    data = settings.run_dir / "data" / "kafka"
    failed: list[KafkaError] = []

    def delivered(error: KafkaError | None, _message: object) -> None:
        if error is not None:
            failed.append(error)

    producer = idempotent_producer(settings, "bridge")
    for n in range(BEFORE):
        producer.produce(TOPIC, record(n)[1], record(n)[0], on_delivery=delivered)
    assert producer.flush(60) == 0 and not failed
    name = f"kafka-full-{os.getpid()}"
    node = ManagedProcess("kafka", settings.run_dir)
    filler: Path | None = None
    try:
        with watched(stack_settings, name, data):
            filler = fill(data)
            for n in range(BEFORE, BEFORE + WHILE_FULL):
                producer.produce(TOPIC, record(n)[1], record(n)[0], on_delivery=delivered)
                producer.poll(0)
            # its next append fails and the node stops (the producer's linger, then one request)
            wait_until(lambda: node.pid() is None, 60, "the Kafka node stopped", interval_s=0.2)
            assert "all log dirs" in (settings.run_dir / "logs" / "kafka.log").read_text()
            wait_for_the_alert(stack_settings, name)
            producer.poll(0)
            assert not failed, failed  # the records wait in the producer
            filler.unlink()
            filler = None
            # the launcher's disk reporter starts the node again on its own
            with resuming(settings, "kafka", reporter_log):
                assert producer.flush(120) == 0 and not failed, failed
                wait_resumed(reporter_log, kafka_nodes(settings)[0])
    finally:
        if filler is not None:
            filler.unlink(missing_ok=True)
    found = Counter((m.key(), m.value()) for m in read_to_end(settings, TOPIC))
    assert found == Counter(record(n) for n in range(BEFORE + WHILE_FULL))
