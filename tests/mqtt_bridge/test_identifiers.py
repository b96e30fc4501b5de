"""Bad Thing and quantity names at the bridge: each message is a dead letter with its reason
and a metric, nothing of it reaches the raw topic, it is never taken again after a restart,
and the bridge goes on with the next valid message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from paho.mqtt.client import MQTTMessage

from mqtt_bridge.records import RowSplitter
from stacktools.harness.scrape import metric_sum, scrape_metrics
from stacktools.harness.wiring import Wiring
from stacktools.stack.settings import Settings
from streamkit.events import parse_row
from streamkit.identifiers import MAX_CHARS
from streamkit.kafka_io import read_to_end, wait_for_count
from streamkit.wire import parse_record_key, record_key
from tests.mqtt_bridge.test_bridge_parts import (
    NO_CLIENT,
    _bridge_without_servers,
    _metric,
    _RecordingProducer,
)
from tests.support.harness import start_bridge, wait_for_keys
from tests.support.messages import header_of, key_of
from tests.support.mqtt import RawPublisher

T0 = 1_554_000_000_000
BAD_THINGS: list[object] = [
    "",
    " M1",
    "M1 ",
    "M1\n",
    "M\x001",
    "a|b",
    "M/1",
    "M+",
    "M#",
    "M\\1",
    "M" * (MAX_CHARS + 1),
    "M\u200b1",
    "M\u00a01",
    "M\ud8001",
    5,
    None,
]
BAD_QUANTITIES = ["a|b", "", " q", "q\t", "q\\", "q" * (MAX_CHARS + 1), "\x07", "q\u2028"]


def payload(thing: object, quantity: str = "vaTorque_C11", time_ms: int = T0) -> bytes:
    # ensure_ascii: a lone surrogate travels as the JSON escape a device could send
    return json.dumps({"Thing": thing, "Timestamp": time_ms, quantity: 1.5, "id": "r"}).encode()


def bad_payloads() -> list[tuple[bytes, str]]:
    return [(payload(thing), "bad_thing") for thing in BAD_THINGS] + [
        (payload("M1", quantity), "bad_quantity_name") for quantity in BAD_QUANTITIES
    ]


def test_a_bad_name_is_a_dead_letter_with_its_reason() -> None:
    """The callback alone (no servers): each message dead-lettered, counted and acknowledged."""
    acked: list[int] = []
    recorder = _RecordingProducer()
    bridge = _bridge_without_servers(RowSplitter(4), recorder, acked)
    before = {
        reason: _metric("bridge_dlq_total", reason=reason)
        for reason in ("bad_thing", "bad_quantity_name")
    }
    cases = bad_payloads()
    for mid, (value, _reason) in enumerate(cases, 1):
        message = MQTTMessage(mid=mid, topic=b"machines/M1")
        message.payload, message.qos = value, 1
        bridge._on_message(NO_CLIENT, None, message)
    assert bridge.failure is None and acked == list(range(1, len(cases) + 1))
    produced = recorder.produced
    assert [topic for topic, _, _ in produced] == ["dlq"] * len(cases)
    assert [(value, dict(headers)["reason"].decode()) for _, value, headers in produced] == cases
    assert _metric("bridge_dlq_total", reason="bad_thing") - before["bad_thing"] == len(BAD_THINGS)
    assert _metric("bridge_dlq_total", reason="bad_quantity_name") - before[
        "bad_quantity_name"
    ] == len(BAD_QUANTITIES)


@pytest.mark.stack
def test_bad_names_over_real_mqtt_are_dead_letters_and_the_bridge_goes_on(
    stack_settings: Settings, tmp_path: Path
) -> None:
    lane = Wiring.private(stack_settings, bridge_only=True)
    service = start_bridge(lane, tmp_path / "bridge.log")
    port = int(service.args[service.args.index("--metrics-port") + 1])
    cases = bad_payloads()
    # valid rows after the bad ones, one with every character the rule allows but a line
    # protocol or a topic might trip on
    good = [payload("M1", time_ms=T0 + 1), payload('Fräse 3,a=b "x"', "power/kW", T0 + 2)]
    publisher = RawPublisher(
        stack_settings.acting_as("mqtt", "machine"), client_prefix=f"names-{lane.prefix}"
    )
    try:
        for value in [value for value, _ in cases] + good:
            publisher.publish_raw(f"{lane.prefix}/names", value)
        assert publisher.wait_all_acked(len(cases) + len(good))
        expected = {
            record_key(row.thing, q, row.timestamp_ms)
            for row in map(parse_row, good)
            for q in row.quantities
        }
        assert wait_for_keys(stack_settings, lane.raw, expected, 60) == expected
        assert wait_for_count(stack_settings, lane.dlq, len(cases), 60) >= len(cases)
        letters = read_to_end(stack_settings, lane.dlq)
        assert [(m.value(), header_of(m, "reason").decode()) for m in letters] == cases
        # the reason's detail, e.g. which character
        assert all(header_of(m, "detail") for m in letters)
        raw = read_to_end(stack_settings, lane.raw)
        # nothing of the bad ones
        assert {m.key() for m in raw} == expected and len(raw) == len(expected)
        assert {parse_record_key(key_of(m)).thing for m in raw} == {"M1", 'Fräse 3,a=b "x"'}
        values = scrape_metrics(port)
        assert metric_sum(values, "bridge_dlq_total", 'reason="bad_thing"') == len(BAD_THINGS)
        assert metric_sum(values, "bridge_dlq_total", 'reason="bad_quantity_name"') == len(
            BAD_QUANTITIES
        )
        assert metric_sum(values, "bridge_messages_total", 'outcome="dlq"') == len(cases)

        # A restart takes none of them again: they were acknowledged once dead-lettered.
        assert service.terminate() == 0
        service.start()
        service.wait_logged('"bridge running"', 60)
        marker = payload("M2", time_ms=T0 + 3)
        publisher.publish_raw(f"{lane.prefix}/names", marker)
        assert publisher.wait_all_acked(len(cases) + len(good) + 1)
        marker_key = record_key("M2", "vaTorque_C11", T0 + 3)
        assert wait_for_keys(stack_settings, lane.raw, expected | {marker_key}, 60) == expected | {
            marker_key
        }
        assert len(read_to_end(stack_settings, lane.dlq)) == len(cases)
    finally:
        publisher.close()
        service.terminate()
