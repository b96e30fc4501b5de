"""The bridge's pure parts: in-order MQTT acks after Kafka, keys and partitions."""
from __future__ import annotations

import random

from hypothesis import given, settings, strategies as st
from confluent_kafka import KafkaError, KafkaException
from paho.mqtt.client import MQTTMessage

from mqtt_bridge.acks import InOrderAcks
from mqtt_bridge.bridge import Bridge
from mqtt_bridge.config import BridgeSettings
from mqtt_bridge.records import RowSplitter
from streamkit.events import Row
from streamkit.shutdown import ShutdownFlag
from streamkit.wire import AvroCodec, record_key, thing_partition


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=1, max_size=30), st.randoms(use_true_random=False))
def test_acks_leave_in_arrival_order_only_when_complete(record_counts: list[int], rng: random.Random) -> None:
    sent: list[int] = []
    acks = InOrderAcks(lambda mid, _qos: sent.append(mid))
    entries = [acks.add(mid, 1, n) for mid, n in enumerate(record_counts)]
    confirmations = [entry for entry, n in zip(entries, record_counts) for _ in range(n)]
    rng.shuffle(confirmations)
    for entry in confirmations:
        acks.confirm(entry, True)
        # the acked prefix is exactly the messages that are complete with all predecessors complete
        complete = 0
        while complete < len(entries) and entries[complete].outstanding == 0:
            complete += 1
        assert sent == list(range(complete))
    assert sent == list(range(len(record_counts))) and len(acks) == 0


def test_failed_delivery_blocks_its_ack_and_all_later_ones() -> None:
    sent: list[int] = []
    acks = InOrderAcks(lambda mid, _qos: sent.append(mid))
    first, second = acks.add(1, 1, 1), acks.add(2, 1, 1)
    acks.confirm(second, True)
    acks.confirm(first, False)
    assert sent == [] and acks.blocked_by_failure and acks.failures == 1


def test_reset_forgets_pending_messages_of_a_lost_connection() -> None:
    sent: list[int] = []
    acks = InOrderAcks(lambda mid, _qos: sent.append(mid))
    stale = acks.add(7, 1, 1)
    assert acks.reset() == 1
    acks.confirm(stale, True)  # confirmed after the reconnect: its mid belongs to the old connection
    assert sent == []


def test_rows_split_into_deterministic_records_in_the_things_partition() -> None:
    row = Row("R0815", 1_554_096_380_468, "id-1", {"actSpeed_C11": 1.5, "vaTorque_C11": -4.25})
    splitter = RowSplitter(partitions=4)
    records = splitter.split(row)
    assert [r.key for r in records] == [b"R0815|actSpeed_C11|1554096380468", b"R0815|vaTorque_C11|1554096380468"]
    assert {r.partition for r in records} == {thing_partition("R0815", 4)}
    decoded = [AvroCodec("measurement").decode(r.value) for r in records]
    assert decoded[1] == {"thing": "R0815", "quantity": "vaTorque_C11", "event_time_ms": 1_554_096_380_468,
                          "value": -4.25, "row_id": "id-1"}
    assert splitter.split(row) == records  # a redelivered row gives byte-identical records
    assert record_key("a|b", "q", 1).rsplit(b"|", 2) == [b"a|b", b"q", b"1"]


class _RecordingProducer:
    """Stands in for Kafka: records what the bridge produces and confirms it at once."""

    def __init__(self) -> None:
        self.produced: list[tuple[str, bytes, list]] = []
        self.refuse_batches = False

    def produce(self, topic: str, value: bytes, key: bytes, on_delivery, headers: list) -> None:
        self.produced.append((topic, value, headers))
        on_delivery(None, None)

    def produce_batch(self, topic: str, batch: list[dict], partition: int, on_delivery) -> int:
        if self.refuse_batches:
            raise KafkaException(KafkaError(KafkaError._FAIL, "refused"))
        self.produced.extend((topic, m["value"], [("partition", partition)]) for m in batch)
        for _ in batch:
            on_delivery(None, None)
        return len(batch)

    def poll(self, _timeout: float) -> int:
        return 0


def _bridge_without_servers(splitter: object) -> Bridge:
    bridge = Bridge.__new__(Bridge)  # no MQTT or Kafka connection: only the callback's logic
    bridge.settings = BridgeSettings.from_sources(cli={"dlq_topic": "dlq", "raw_topic": "raw"})
    bridge.shutdown, bridge.max_future_ms, bridge.failure, bridge.produce_failed = ShutdownFlag(), 3_600_000, None, False
    bridge.producer, bridge.splitter = _RecordingProducer(), splitter
    bridge.acks = InOrderAcks(lambda _mid, _qos: None)
    return bridge


def test_an_unforeseen_failure_on_one_message_is_a_dead_letter_not_a_dead_callback() -> None:
    class Exploding:
        def batch(self, _row: Row) -> tuple[int, list]:
            raise KeyError("a bug nobody foresaw")

    bridge = _bridge_without_servers(Exploding())
    message = MQTTMessage(mid=1, topic=b"machines/M1")
    message.payload, message.qos = b'{"Thing": "M1", "Timestamp": 1554000000000, "a": 1}', 1
    bridge._on_message(None, None, message)  # must not raise
    (topic, value, headers), = bridge.producer.produced
    assert (topic, value, dict(headers)["reason"]) == ("dlq", message.payload, b"unprocessable")
    assert bridge.failure is None and len(bridge.acks) == 0  # acked: never redelivered


def test_a_failure_outside_one_message_ends_the_run_instead_of_killing_the_callback() -> None:
    bridge = _bridge_without_servers(RowSplitter(2))
    bridge.producer = None  # every use of Kafka now fails with AttributeError
    message = MQTTMessage(mid=1, topic=b"machines/M1")
    message.payload, message.qos = b'{"Thing": "M1", "Timestamp": 1554000000000, "a": 1}', 1
    bridge._on_message(None, None, message)  # must not raise
    assert isinstance(bridge.failure, AttributeError)


def test_after_a_failed_produce_no_later_message_overtakes_it() -> None:
    """Message 1 cannot be queued (a non-retriable error): message 2 must not reach Kafka
    before it, or it would overtake it in its partition; both wait for the restart."""
    bridge = _bridge_without_servers(RowSplitter(2))
    messages = []
    for mid in (1, 2):
        message = MQTTMessage(mid=mid, topic=b"machines/M1")
        message.payload, message.qos = b'{"Thing": "M1", "Timestamp": %d, "a": 1}' % (1554000000000 + mid), 1
        messages.append(message)
    bridge.producer.refuse_batches = True
    bridge._on_message(None, None, messages[0])
    bridge.producer.refuse_batches = False  # Kafka would take message 2 now
    bridge._on_message(None, None, messages[1])
    assert bridge.producer.produced == [] and bridge.acks.blocked_by_failure and bridge.failure is None
