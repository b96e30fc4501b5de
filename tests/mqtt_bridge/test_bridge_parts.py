"""The bridge's pure parts: in-order MQTT acks after Kafka, keys and partitions."""

from __future__ import annotations

import dataclasses
import itertools
import random
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from hypothesis import given, settings
from hypothesis import strategies as st
from paho.mqtt.client import MQTTMessage
from prometheus_client import REGISTRY

from mqtt_bridge.acks import InOrderAcks
from mqtt_bridge.bridge import Bridge
from mqtt_bridge.config import BridgeSettings
from mqtt_bridge.records import RowSplitter
from streamkit.events import Row, RowError, parse_row
from streamkit.mqtt_client import make_client
from streamkit.shutdown import ShutdownFlag
from streamkit.wire import AvroCodec, record_key, thing_partition
from tests.mqtt_bridge.test_records import SAMPLE


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 5), min_size=1, max_size=30), st.randoms(use_true_random=False))
def test_acks_leave_in_arrival_order_only_when_complete(
    record_counts: list[int], rng: random.Random
) -> None:
    sent: list[int] = []
    acks = InOrderAcks(lambda mid, _qos: sent.append(mid))
    entries = [acks.add(mid, 1, n) for mid, n in enumerate(record_counts)]
    confirmations = [
        entry for entry, n in zip(entries, record_counts, strict=True) for _ in range(n)
    ]
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
    # confirmed after the reconnect: its mid belongs to the old connection
    acks.confirm(stale, True)
    assert sent == []


def test_rows_split_into_deterministic_records_in_the_things_partition() -> None:
    row = Row("R0815", 1_554_096_380_468, "id-1", {"actSpeed_C11": 1.5, "vaTorque_C11": -4.25})
    splitter = RowSplitter(partitions=4)
    records = splitter.split(row)
    assert [r.key for r in records] == [
        b"R0815|actSpeed_C11|1554096380468",
        b"R0815|vaTorque_C11|1554096380468",
    ]
    assert {r.partition for r in records} == {thing_partition("R0815", 4)}
    decoded = [AvroCodec("measurement").decode(r.value) for r in records]
    assert decoded[1] == {
        "thing": "R0815",
        "quantity": "vaTorque_C11",
        "event_time_ms": 1_554_096_380_468,
        "value": -4.25,
        "row_id": "id-1",
    }
    assert splitter.split(row) == records  # a redelivered row gives byte-identical records
    with pytest.raises(RowError):  # a Thing holding the key separator never reaches a key
        parse_row(b'{"Thing": "a|b", "Timestamp": 1554096380468, "q": 1}')


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


#: The MQTT client the callback receives; it never uses it.
NO_CLIENT: Any = None


def _bridge_without_servers(
    splitter: Any, producer: Any = None, acked: list[int] | None = None
) -> Bridge:
    """A bridge whose Kafka producer and row splitter are the test's stand-ins (typed Any: they
    implement only what the callback calls)."""
    bridge = Bridge.__new__(Bridge)  # no MQTT or Kafka connection: only the callback's logic
    bridge.settings = BridgeSettings.from_sources(cli={"dlq_topic": "dlq", "raw_topic": "raw"})
    bridge.shutdown, bridge.max_future_ms, bridge.failure, bridge.produce_failed = (
        ShutdownFlag(),
        3_600_000,
        None,
        False,
    )
    bridge.closing = False
    # never connected (so plain: no CA needed), nothing to keep alive
    bridge.client = make_client(dataclasses.replace(bridge.settings, tls=False))
    stand_in: Any = producer or _RecordingProducer()
    bridge.producer, bridge.splitter = stand_in, splitter
    sent = acked if acked is not None else []
    bridge.acks = InOrderAcks(
        lambda mid, _qos: sent.append(mid), on_delivery_failure=bridge._delivery_failed
    )
    return bridge


class _LateReportsProducer:
    """Stands in for Kafka as librdkafka behaves: each record's delivery report comes later,
    one call per record, in whatever order the test serves them."""

    def __init__(self) -> None:
        self.produced: list[tuple[bytes, bytes, int]] = []
        self.reports: list = []  # the on_delivery of each produced record, in produce order
        self.on_poll: Callable[[], None] | None = None  # what else happens while it polls

    def produce_batch(self, topic: str, batch: list[dict], partition: int, on_delivery) -> int:
        assert topic == "raw"
        self.produced.extend((m["key"], m["value"], partition) for m in batch)
        self.reports.extend(on_delivery for _ in batch)
        return len(batch)

    def poll(self, _timeout: float) -> int:
        if self.on_poll is not None:
            self.on_poll()
        return 0


def _sample_messages(count: int) -> list[MQTTMessage]:
    lines = [line for line in SAMPLE.read_bytes().splitlines() if line.count(b"_C11") >= 2][:count]
    messages = []
    for mid, line in enumerate(lines, 1):
        message = MQTTMessage(mid=mid, topic=b"machines/R0815")
        message.payload, message.qos = line, 1
        messages.append(message)
    return messages


def _metric(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_each_message_is_acked_after_kafka_confirmed_all_its_records_and_in_arrival_order() -> None:
    acked: list[int] = []
    producer = _LateReportsProducer()
    bridge = _bridge_without_servers(RowSplitter(4), producer, acked)
    messages = _sample_messages(20)
    ok, records = _metric("bridge_messages_total", outcome="ok"), _metric("bridge_records_total")
    for message in messages:
        bridge._on_message(NO_CLIENT, None, message)
    codec = AvroCodec("measurement")
    expected = []
    for (
        message
    ) in messages:  # the bytes from the definitions: the codec, the key format, the partitioner
        row = parse_row(bytes(message.payload))
        expected += [
            (
                record_key(row.thing, q, row.timestamp_ms),
                codec.encode(
                    {
                        "thing": row.thing,
                        "quantity": q,
                        "event_time_ms": row.timestamp_ms,
                        "value": v,
                        "row_id": row.row_id,
                    }
                ),
                thing_partition(row.thing, 4),
            )
            for q, v in row.quantities.items()
        ]
    assert producer.produced == expected and acked == []
    assert _metric("bridge_messages_total", outcome="ok") - ok == len(messages)
    assert _metric("bridge_records_total") - records == len(expected)
    outstanding = {m.mid: len(parse_row(bytes(m.payload)).quantities) for m in messages}
    owner = [mid for mid, n in outstanding.items() for _ in range(n)]  # the message of each report
    order = list(range(len(owner)))
    random.Random(7).shuffle(order)
    for index in order:
        producer.reports[index](None, None)
        outstanding[owner[index]] -= 1
        complete_prefix = list(itertools.takewhile(lambda mid: outstanding[mid] == 0, outstanding))
        assert acked == complete_prefix
    assert acked == [m.mid for m in messages] and len(bridge.acks) == 0 and bridge.failure is None


def test_a_failed_delivery_keeps_its_message_unacked_and_defers_every_later_one() -> None:
    acked: list[int] = []
    producer = _LateReportsProducer()
    bridge = _bridge_without_servers(RowSplitter(4), producer, acked)
    first, second, third = _sample_messages(3)
    failures, deferred = (
        _metric("bridge_delivery_failures_total"),
        _metric("bridge_messages_total", outcome="deferred"),
    )
    bridge._on_message(NO_CLIENT, None, first)
    bridge._on_message(NO_CLIENT, None, second)
    reports = list(producer.reports)
    for report in reports[1:]:
        report(None, None)
    # the first message's first record
    reports[0](KafkaError(KafkaError._MSG_TIMED_OUT, "timed out"), None)
    assert acked == [] and bridge.acks.blocked_by_failure and bridge.produce_failed
    assert _metric("bridge_delivery_failures_total") - failures == 1
    bridge._on_message(NO_CLIENT, None, third)  # must not overtake the failed one in its partition
    assert len(producer.produced) == len(reports) and bridge.failure is None
    assert _metric("bridge_messages_total", outcome="deferred") - deferred == 1


def test_an_unforeseen_failure_on_one_message_is_a_dead_letter_not_a_dead_callback() -> None:
    class Exploding:
        def batch(self, _row: Row) -> tuple[int, list]:
            raise KeyError("a bug nobody foresaw")

    recorder = _RecordingProducer()
    bridge = _bridge_without_servers(Exploding(), recorder)
    message = MQTTMessage(mid=1, topic=b"machines/M1")
    message.payload, message.qos = b'{"Thing": "M1", "Timestamp": 1554000000000, "a": 1}', 1
    bridge._on_message(NO_CLIENT, None, message)  # must not raise
    ((topic, value, headers),) = recorder.produced
    assert (topic, value, dict(headers)["reason"]) == ("dlq", message.payload, b"unprocessable")
    assert bridge.failure is None and len(bridge.acks) == 0  # acked: never redelivered


def test_a_failure_outside_one_message_ends_the_run_instead_of_killing_the_callback() -> None:
    bridge = _bridge_without_servers(RowSplitter(2))
    no_kafka: Any = None
    bridge.producer = no_kafka  # every use of Kafka now fails with AttributeError
    message = MQTTMessage(mid=1, topic=b"machines/M1")
    message.payload, message.qos = b'{"Thing": "M1", "Timestamp": 1554000000000, "a": 1}', 1
    bridge._on_message(NO_CLIENT, None, message)  # must not raise
    assert isinstance(bridge.failure, AttributeError)


def test_after_a_failed_produce_no_later_message_overtakes_it() -> None:
    """Message 1 cannot be queued (a non-retriable error): message 2 must not reach Kafka
    before it, or it would overtake it in its partition; both wait for the restart."""
    recorder = _RecordingProducer()
    bridge = _bridge_without_servers(RowSplitter(2), recorder)
    messages = []
    for mid in (1, 2):
        message = MQTTMessage(mid=mid, topic=b"machines/M1")
        message.payload, message.qos = (
            b'{"Thing": "M1", "Timestamp": %d, "a": 1}' % (1554000000000 + mid),
            1,
        )
        messages.append(message)
    recorder.refuse_batches = True
    bridge._on_message(NO_CLIENT, None, messages[0])
    recorder.refuse_batches = False  # Kafka would take message 2 now
    bridge._on_message(NO_CLIENT, None, messages[1])
    assert recorder.produced == [] and bridge.acks.blocked_by_failure and bridge.failure is None


def test_a_message_waiting_for_room_when_the_shutdown_comes_is_left_for_the_next_run() -> None:
    """Produced after the shutdown's flush had begun, its PUBACK could come after the
    DISCONNECT and the next run would send it again: it stays unacked and unproduced."""
    producer = _LateReportsProducer()
    bridge = _bridge_without_servers(RowSplitter(4), producer)
    bridge.settings = dataclasses.replace(bridge.settings, max_unacked=1)
    first, second = _sample_messages(2)
    deferred = _metric("bridge_messages_total", outcome="deferred")
    bridge._on_message(NO_CLIENT, None, first)  # unconfirmed: the limit is reached
    producer.on_poll = bridge.shutdown.request  # SIGTERM while the second waits for room
    bridge._on_message(NO_CLIENT, None, second)
    assert (
        len(producer.produced) == len(parse_row(bytes(first.payload)).quantities)
        and bridge.failure is None
    )
    assert _metric("bridge_messages_total", outcome="deferred") - deferred == 1


def test_the_mqtt_session_metrics_follow_connects_disconnects_and_a_lost_session() -> None:
    """What the MQTT-session alerts read: connected 1/0, and a reconnect whose broker no longer
    had our persistent session counted (the first connect of a run is not one)."""
    from paho.mqtt.client import ConnectFlags
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.reasoncodes import ReasonCode

    bridge = _bridge_without_servers(RowSplitter(4))
    bridge.connected_before = False
    ok = ReasonCode(PacketTypes.CONNACK, "Success")
    lost_before = _metric("bridge_mqtt_sessions_lost_total")

    bridge._on_connect(bridge.client, None, ConnectFlags(session_present=False), ok)
    assert _metric("bridge_mqtt_connected") == 1
    assert _metric("bridge_mqtt_sessions_lost_total") == lost_before  # a first session
    bridge._on_disconnect(bridge.client, None, None, ok, None)
    assert _metric("bridge_mqtt_connected") == 0
    bridge._on_connect(bridge.client, None, ConnectFlags(session_present=True), ok)
    assert _metric("bridge_mqtt_sessions_lost_total") == lost_before  # resumed
    bridge._on_connect(bridge.client, None, ConnectFlags(session_present=False), ok)
    assert _metric("bridge_mqtt_sessions_lost_total") == lost_before + 1
    assert _metric("bridge_mqtt_connected") == 1
