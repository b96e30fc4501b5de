"""The three-node Kafka cluster partitioned while a producer writes as the bridge does (acks=all,
idempotent): a partition's leader cut from the two others, the active KRaft controller cut
from them, and a node on the minority side at random (tests/support/partition.py). Each node
runs in a group of its own; the producer and the reader reach every node throughout, as a
client on the plant network does. Then the writer itself on the minority side, with the
partition's leader, cut from the two others.

The isolated node keeps running. With min.insync.replicas 2 it can acknowledge nothing alone,
the majority fences it after its session times out and elects leaders among themselves, and the
producer moves to them. Checked as Jepsen checks a queue:
every acknowledged record is in the topic exactly once, nothing is there that was not sent,
and each partition's records keep the order they were acknowledged in.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Message

from stacktools.stack import Stack
from stacktools.stack.servers.base import Component
from stacktools.stack.servers.kafka import kafka_nodes
from stacktools.stack.settings import Settings
from streamkit.kafka_clients import admin_client, idempotent_producer
from streamkit.kafka_io import BROKER_SESSION_S, LEADER_CHANGE_S, read_to_end
from tests.support.full_disk import copy_stack_secrets, settings_in
from tests.support.messages import value_of
from tests.support.partition import Endpoint, Network, network
from tests.support.ports import spaced_free_ports
from tests.support.waits import settle

pytestmark = [pytest.mark.stack, pytest.mark.partition]

TOPIC = "machinedata.raw"
#: Rounds (one isolated node each; the first three: a leader, the controller, any node);
#: PARTITION_ROUNDS runs more.
ROUNDS = int(os.environ.get("PARTITION_ROUNDS", "3"))
#: A cut held past the isolated broker's session and a controller election on top of it: the
#: majority has fenced it and moved its leaderships by then.
HELD_S = 2 * BROKER_SESSION_S + 5
RATE = 200  # records a second


class GroupedStack(Stack):
    """The launcher's stack, each server started inside its own group of ``net``."""

    def __init__(self, settings: Settings, names: list[str], groups: dict[str, Endpoint]) -> None:
        super().__init__(settings, names, allow_external=False)
        self.node_groups = groups

    def _start(self, component: Component) -> bool:
        with self.node_groups[component.name].joined():
            return super()._start(component)


@pytest.fixture
def cluster(stack_settings: Settings, tmp_path: Path) -> Iterator[tuple[Settings, Network, dict]]:
    """Three Kafka nodes of this test's own, each in a group, with the stack's certificates and
    passwords; the settings, the network and the groups by node name."""
    run = tmp_path / "run"
    run.mkdir()
    copy_stack_secrets(stack_settings, run)
    ports = {
        "KAFKA_PORT": spaced_free_ports(3),
        "KAFKA_CONTROLLER_PORT": spaced_free_ports(3),
        "KAFKA_BROKERS": 3,
    }
    settings = settings_in(stack_settings, run, ports)
    with network() as net:
        groups = {
            node.name: net.group(node.name, tuple(node.ports)) for node in kafka_nodes(settings)
        }
        stack = GroupedStack(settings, ["kafka"], groups)
        try:
            yield stack.up(), net, groups
        finally:
            stack.down()


def isolate(net: Network, groups: dict[str, Endpoint], victim: str) -> None:
    for name, group in groups.items():
        if name != victim:
            net.cut(groups[victim], group)


def node_name(node: int) -> str:
    return "kafka" if node == 1 else f"kafka-{node}"


def active_controller(settings: Settings) -> int:
    """The KRaft quorum's leader: the newest epoch any node's quorum-state file records."""
    states = [
        json.loads(path.read_text())
        for path in (settings.run_dir / "data").glob("kafka*/__cluster_metadata-0/quorum-state")
    ]
    newest = max(states, key=lambda state: state["leaderEpoch"])
    return int(newest["leaderId"])


def partition_leader(settings: Settings, partition: int = 0) -> int:
    metadata = admin_client(settings).list_topics(TOPIC, timeout=30).topics[TOPIC]
    return metadata.partitions[partition].leader


def fully_replicated(settings: Settings) -> bool:
    try:
        metadata = admin_client(settings).list_topics(TOPIC, timeout=10).topics[TOPIC]
    except Exception:  # noqa: BLE001 - a cluster still settling
        return False
    return all(len(p.isrs) == 3 for p in metadata.partitions.values())


def numbered(message: Message) -> tuple[int, int]:
    """(partition, the record's number)."""
    partition = message.partition()
    assert partition is not None
    return partition, int(value_of(message))


class Writer:
    """Records 0, 1, 2, ... at a steady rate; what Kafka acknowledged, by partition in order."""

    def __init__(self, settings: Settings) -> None:
        self.producer = idempotent_producer(settings, "partition-writer", **{"linger.ms": 5})
        self.sent = 0
        self.acknowledged: dict[int, list[int]] = {}
        self.failed: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, name="writer", daemon=True)

    def delivered(self, error: KafkaError | None, message: Message) -> None:
        if error is None:
            partition, value = numbered(message)
            self.acknowledged.setdefault(partition, []).append(value)
        else:
            self.failed.append(str(error))

    def run(self) -> None:
        while not self.stop.is_set():
            key = f"T-{self.sent % 7}|q|{self.sent}".encode()
            self.producer.produce(TOPIC, str(self.sent).encode(), key, on_delivery=self.delivered)
            self.sent += 1
            self.producer.poll(0)
            time.sleep(1 / RATE)

    def finish(self) -> None:
        self.stop.set()
        self.thread.join()
        assert self.producer.flush(LEADER_CHANGE_S) == 0, "records left unacknowledged"


def test_an_isolated_kafka_node_loses_no_acknowledged_record(cluster) -> None:
    settings, net, groups = cluster
    seed = int(os.environ.get("PARTITION_SEED", str(random.randrange(1_000_000))))
    rng = random.Random(seed)
    writer = Writer(settings)
    writer.thread.start()
    rounds = []
    try:
        for round_no in range(ROUNDS):
            time.sleep(rng.uniform(1, 4))
            assert settle(lambda: fully_replicated(settings), LEADER_CHANGE_S, "full ISR")
            role = ("leader", "controller", "any")[round_no % 3]
            if role == "leader":
                victim = node_name(partition_leader(settings))
            elif role == "controller":
                victim = node_name(active_controller(settings))
            else:
                victim = rng.choice(sorted(groups))
            acknowledged_before = sum(map(len, writer.acknowledged.values()))
            isolate(net, groups, victim)
            time.sleep(HELD_S)
            assert net.dropped_packets() > 0
            net.heal()
            acknowledged_after = sum(map(len, writer.acknowledged.values()))
            rounds.append((role, victim, acknowledged_after - acknowledged_before))
            # the majority went on: records were acknowledged while a node was cut off
            assert acknowledged_after > acknowledged_before, rounds
        assert settle(lambda: fully_replicated(settings), LEADER_CHANGE_S, "full ISR")
    finally:
        writer.finish()
    print(f"PARTITION_SEED={seed} rounds (role, node isolated, acknowledged meanwhile): {rounds}")
    assert_exactly_once(settings, writer)


def test_a_writer_on_the_minority_side_is_acknowledged_nothing_and_loses_nothing(
    cluster,
) -> None:
    """The leader of partition 0 and the writer on one side, the two other nodes on the other:
    the majority side goes on without the writer, which can reach only a node that cannot
    replicate. Nothing is acknowledged to it while it is cut off; its records wait in the
    producer and arrive once, in order, after healing."""
    settings, net, groups = cluster
    writers = net.group("writers")
    with writers.joined():  # the producer's every connection opened from the writers' group
        assert settle(lambda: fully_replicated(settings), LEADER_CHANGE_S, "full ISR")
        writer = Writer(settings)
        writer.thread.start()
        try:
            time.sleep(2)
            victim = node_name(partition_leader(settings))
            isolate(net, groups, victim)
            for name, group in groups.items():
                if name != victim:
                    net.cut(writers, group)
            # what the nodes acknowledged before the cut, on its way back (the loopback's round
            # trip and the producer's linger are milliseconds)
            time.sleep(1)
            acknowledged_before = sum(map(len, writer.acknowledged.values()))
            sent_before = writer.sent
            time.sleep(HELD_S)
            acknowledged_meanwhile = sum(map(len, writer.acknowledged.values()))
            assert net.dropped_packets() > 0
            net.heal()
            assert writer.sent - sent_before > RATE, "the writer stopped writing"
            assert acknowledged_meanwhile == acknowledged_before, "acknowledged by a minority"
            assert settle(lambda: fully_replicated(settings), LEADER_CHANGE_S, "full ISR")
        finally:
            writer.finish()
        print(f"writer and {victim} cut from the two others for {HELD_S} s")
        assert_exactly_once(settings, writer)


def assert_exactly_once(settings: Settings, writer: Writer) -> None:
    """Jepsen's queue check: every acknowledged record in the topic once, none that was not
    sent, each partition in the order its records were acknowledged."""
    assert not writer.failed, writer.failed[:5]
    messages = read_to_end(settings, TOPIC, isolation="read_uncommitted")
    values = [numbered(m)[1] for m in messages]
    counts = Counter(values)
    assert not [v for v, n in counts.items() if n > 1], "duplicates"
    assert set(values) <= set(range(writer.sent)), "records nobody sent"
    acknowledged = {v for values_ in writer.acknowledged.values() for v in values_}
    assert acknowledged <= set(values), f"{len(acknowledged - set(values))} acknowledged, lost"
    by_partition: dict[int, list[int]] = {}
    for message in sorted(messages, key=lambda m: (m.partition(), m.offset())):
        partition, value = numbered(message)
        by_partition.setdefault(partition, []).append(value)
    for partition, acked in writer.acknowledged.items():
        wanted = set(acked)
        stored = [v for v in by_partition[partition] if v in wanted]
        assert stored == acked, f"partition {partition}: acknowledged order not kept"
