"""KAFKA_BROKERS=3: three KRaft nodes in one quorum, every topic replicated three times with two
in sync required, and a node killed with SIGKILL changes nothing a client sees."""

from __future__ import annotations

import random
import string
from pathlib import Path

import pytest
from confluent_kafka.admin import ConfigResource, ResourceType

from stacktools.compose.credentials import new_cluster_id
from stacktools.stack import Stack, StackError, ensure_credentials
from stacktools.stack.servers import kafka as kafka_server
from stacktools.stack.servers.kafka import Kafka, kafka_nodes
from stacktools.stack.settings import Settings
from streamkit.deadline import wait_until
from streamkit.kafka_clients import admin_client
from tests.support import server_checks as checks
from tests.support.exactness import assert_back, kill_group, restart_broker
from tests.support.require import cannot_run

_BASE64URL = set(string.ascii_letters + string.digits + "-_")


def three_nodes(run_dir: Path) -> Settings:
    return ensure_credentials(
        Settings.from_sources(
            environ={
                "STACK_RUN_DIR": str(run_dir),
                "KAFKA_BROKERS": "3",
                "KAFKA_PORT": "29092",
                "KAFKA_CONTROLLER_PORT": "29093",
            }
        )
    )


def test_each_node_gets_its_own_ports_and_the_whole_quorum(tmp_path: Path) -> None:
    settings = three_nodes(tmp_path)
    assert settings.bootstrap_servers == "127.0.0.1:29092,127.0.0.1:29094,127.0.0.1:29096"
    nodes = kafka_nodes(settings)
    assert [node.name for node in nodes] == ["kafka", "kafka-2", "kafka-3"]
    assert [node.ports for node in nodes] == [[29092, 29093], [29094, 29095], [29096, 29097]]
    second = nodes[1]
    second.conf_dir.mkdir(parents=True)
    second.data_dir.mkdir(parents=True)
    # already formatted: prepare writes config only
    for marker in ("meta.properties", Kafka.AUTH_MARKER):
        (second.data_dir / marker).write_text("")
    (second.data_dir / Kafka.NODES_MARKER).write_text("3\n")
    second.prepare()
    properties = dict(
        line.split("=", 1)
        for line in (second.conf_dir / "server.properties").read_text().splitlines()
    )
    assert properties["node.id"] == "2"
    assert (
        properties["controller.quorum.voters"]
        == "1@127.0.0.1:29093,2@127.0.0.1:29095,3@127.0.0.1:29097"
    )
    assert properties["listeners"] == "CLIENT://127.0.0.1:29094,CONTROLLER://127.0.0.1:29095"
    checks.check_three_node_replication(properties)


def test_data_of_a_cluster_of_another_size_is_refused_with_the_way_out(tmp_path: Path) -> None:
    node = Kafka(three_nodes(tmp_path))
    node.data_dir.mkdir(parents=True)
    for marker in ("meta.properties", Kafka.AUTH_MARKER):  # what a single-node stack left behind
        (node.data_dir / marker).write_text("")
    with pytest.raises(
        StackError, match="cluster of 1 node.*not KAFKA_BROKERS=3.*another STACK_RUN_DIR"
    ):
        node.prepare()


@pytest.mark.stack
def test_every_topic_has_three_replicas_and_needs_two_in_sync(replicated_stack: Settings) -> None:
    checks.check_transactions(replicated_stack)  # creates the transaction state topic
    admin = admin_client(replicated_stack)
    metadata = admin.list_topics(timeout=30)
    assert sorted(metadata.brokers) == [1, 2, 3]
    topics = {name for name in metadata.topics if not name.startswith("test.")}
    assert {"machinedata.raw", "machinedata.joined", "__transaction_state"} <= topics, topics
    for name in topics:
        partitions = metadata.topics[name].partitions.values()
        assert all(len(partition.replicas) == 3 for partition in partitions), name
    configs = admin.describe_configs([ConfigResource(ResourceType.TOPIC, name) for name in topics])
    for resource, future in configs.items():
        assert future.result(timeout=30)["min.insync.replicas"].value == "2", resource.name


@pytest.mark.stack
def test_a_node_killed_and_restarted_changes_nothing_a_client_sees(
    replicated_stack: Settings,
) -> None:
    # Made before the kill: existing topics stay writable with a node down, but creating one
    # then may wait out its whole timeout (the admin client sends it to a "controller" the
    # metadata names, possibly the dead node; README, "Three Kafka nodes").
    transactional, plain = (
        checks.create_topic(replicated_stack),
        checks.create_topic(replicated_stack),
    )
    kafka = Stack(replicated_stack, ["kafka"])
    killed = kill_group(kafka, random.Random())
    try:
        # two of three in sync: still writable
        checks.check_transactions(replicated_stack, transactional)
        checks.check_plain_produce_consume(replicated_stack, plain)
    finally:
        restart_broker(kafka)
    assert_back(kafka, killed)
    admin = admin_client(replicated_stack)
    node = int(killed.name.removeprefix("kafka").removeprefix("-") or 1)

    # every partition of every topic has its three replicas in sync again
    def back_in_sync() -> bool:
        topics = admin.list_topics(timeout=10).topics.values()
        return all(
            node in partition.isrs for topic in topics for partition in topic.partitions.values()
        )

    wait_until(
        back_in_sync, 120, f"{killed} back in every partition's in-sync replicas", interval_s=2
    )


def test_new_cluster_ids_are_kraft_ids() -> None:
    ids = {new_cluster_id() for _ in range(200)}
    assert len(ids) == 200 and all(len(i) == 22 and set(i) <= _BASE64URL for i in ids)


def test_storage_is_formatted_with_a_cluster_id_that_begins_with_a_dash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """About one fresh stack in 64 drew such an id, and the storage tool took it for an option."""
    settings = ensure_credentials(Settings.from_sources(environ={"STACK_RUN_DIR": str(tmp_path)}))
    node = Kafka(settings)
    missing = node.missing_install()
    if missing:
        cannot_run(missing)
    monkeypatch.setattr(kafka_server, "new_cluster_id", lambda: "-DC3d9-yS8Og7gDKKmX0uw")
    node.prepare()
    meta = dict(
        line.split("=", 1)
        for line in (node.data_dir / "meta.properties").read_text().splitlines()
        if "=" in line and not line.startswith("#")
    )
    assert meta["cluster.id"] == "-DC3d9-yS8Og7gDKKmX0uw"
