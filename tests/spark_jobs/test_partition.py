"""A Spark driver cut from Kafka in the middle of a transaction, replaced while it is away, and
let back in: the zombie of stream processing (tests/support/partition.py).

Driver A runs the join job and is cut from every Kafka node while one of its transactions is
open. It keeps running and believes it is alive. Driver B, started on the same checkpoint as a
supervisor would start a replacement, takes over its transactional identity: Kafka aborts A's
open transaction and B runs to the end of the input. Then the link heals and A tries to go on.
The test shows A fenced (its transaction aborted, its records never read by a read_committed
reader, A stopping with the fencing error) and the committed output equal to the oracle.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from stacktools.stack.settings import Settings
from streamkit.kafka_clients import client_config
from streamkit.kafka_io import high_watermarks, read_to_end
from tests.oracles.pipeline import join_pairs
from tests.support.committed import committed_pairs
from tests.support.partition import network
from tests.support.spark import log_tail, spark_service, wait_driver_gone
from tests.support.waits import settle

from .test_join_job import join_lane  # noqa: F401 - the fixture

pytestmark = [pytest.mark.stack, pytest.mark.spark, pytest.mark.partition]
#: Batches of this many offsets: the sample makes several.
OFFSETS_PER_TRIGGER = "2000"


def stable_ends(settings: Settings, topic: str) -> dict[int, int]:
    """Each partition's last stable offset: where a read_committed reader stops, before the
    first record of a transaction still open."""
    consumer = Consumer(
        {
            **client_config(settings, "partition-test"),
            "group.id": "partition-test-lso",
            "isolation.level": "read_committed",
        }
    )
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30, cached=False)[1]
            for p in high_watermarks(settings, topic)
        }
    finally:
        consumer.close()


def open_transaction(settings: Settings, topic: str) -> bool:
    """Whether a transaction has written to ``topic`` and not yet ended."""
    stable = stable_ends(settings, topic)
    return any(end > stable[p] for p, end in high_watermarks(settings, topic).items())


def test_a_driver_cut_from_kafka_mid_transaction_is_fenced_by_its_replacement(
    stack_settings: Settings,
    join_lane: dict,  # noqa: F811 - the fixture
    tmp_path: Path,
) -> None:
    args = [*join_lane["args"], "--available-now", "--max-offsets-per-trigger", OFFSETS_PER_TRIGGER]
    joined = join_lane["joined"]
    log_a, log_b = tmp_path / "driver-a.log", tmp_path / "driver-b.log"
    with network() as net:
        driver = net.group("driver-a")
        kafka = net.server("kafka", tuple(stack_settings.kafka_node_ports))
        gate = tmp_path / "gate"
        gate.mkdir()
        pause = {"EOS_FAULT_POINT": "after_produce", "EOS_FAULT_BATCH": "1"}
        with driver.joined():
            zombie = spark_service(
                "tests.drivers.faulty_job",
                ["spark_jobs.join", *args],
                log_a,
                {**pause, "EOS_PAUSE_GATE": str(gate)},
            ).start()
        try:
            # the moment: A has written batch 1 in its transaction and not committed it
            assert settle(
                lambda: (gate / "paused").exists() or not zombie.alive(),
                600,
                "driver A inside a transaction",
                interval_s=0.1,
            )
            assert zombie.alive(), log_tail(log_a)
            net.cut(driver, kafka)
            (gate / "release").touch()  # A goes on, cut off: to its commit, which cannot arrive
            assert open_transaction(stack_settings, joined), "no transaction of A's open"
            written_by_a = sum(high_watermarks(stack_settings, joined).values())
            replacement = spark_service("spark_jobs.join", args, log_b).start()
            assert replacement.popen.wait(900) == 0, log_tail(log_b)
            wait_driver_gone(replacement)
            # B's start aborted A's open transaction: nothing of it is left pending
            assert not open_transaction(stack_settings, joined)
            assert zombie.alive(), "A stopped while cut off: it was never a zombie"
            assert net.dropped_packets() > 0
            net.heal()
            code = zombie.popen.wait(300)
            wait_driver_gone(zombie)
        finally:
            if zombie.process is not None and zombie.popen.poll() is None:
                zombie.kill9()
    zombie_log = log_a.read_text()
    assert code != 0 and "fenced" in zombie_log.lower(), (code, zombie_log[-3000:])
    # A's aborted records are in the log, never read as committed
    every_record = len(read_to_end(stack_settings, joined, isolation="read_uncommitted"))
    committed = len(read_to_end(stack_settings, joined))
    fencing = next(line for line in zombie_log.splitlines() if "fenced" in line.lower())
    print(f"A exited {code}: {fencing[:300]}; records {every_record}, committed {committed}")
    assert every_record > committed, (every_record, committed, written_by_a)
    expected, _ = join_pairs(join_lane["settings"], join_lane["fed"])
    got = committed_pairs(stack_settings, joined)
    assert got == expected, (
        sum(got.values()),
        sum(expected.values()),
        list((got - expected).items())[:3],
        list((expected - got).items())[:3],
    )
