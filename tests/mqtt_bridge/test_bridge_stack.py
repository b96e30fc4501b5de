"""Simulator -> Mosquitto -> bridge -> Kafka on the real stack: exact, lossless, robust."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stacktools.harness.services import service_process
from stacktools.harness.wiring import Wiring
from stacktools.stack.settings import Settings
from streamkit.kafka_io import read_to_end, wait_for_count
from streamkit.paths import REPO_ROOT
from streamkit.wire import AvroCodec, parse_record_key, thing_partition
from tests.support.harness import expected_records, group_by_key, start_bridge, wait_for_keys
from tests.support.messages import header_of, key_of, value_of
from tests.support.mqtt import RawPublisher
from tests.support.waits import landing_limit_s

pytestmark = pytest.mark.stack
SAMPLE = REPO_ROOT / "tests" / "data" / "test_events.json"
KILL_ROUNDS = int(os.environ.get("BRIDGE_KILL_ROUNDS", "3"))


@pytest.fixture
def lane(stack_settings: Settings) -> Wiring:
    return Wiring.private(stack_settings, bridge_only=True)


def assert_raw_topic_holds_exactly(
    settings: Settings, lane: Wiring, events: Path, *, check_order: bool
) -> int:
    expected = expected_records(events)
    messages = read_to_end(settings, lane.raw)
    grouped = group_by_key(messages)
    assert set(grouped) - set(expected) == set(), "unexpected keys"
    missing = set(expected) - set(grouped)
    assert not missing, f"{len(missing)} records missing, e.g. {sorted(missing)[:3]}"
    codec = AvroCodec("measurement")
    for key, values in grouped.items():
        assert len(set(values)) == 1, f"{key!r}: a duplicate that is not an identical re-send"
        record = codec.decode(values[0])
        assert record["value"] == expected[key]
    partitions = settings.topic_partitions
    assert all(
        m.partition() == thing_partition(parse_record_key(key_of(m)).thing, partitions)
        for m in messages
    )
    if check_order:  # each (thing, quantity) stream is in event-time order within its partition
        last: dict[tuple[bytes, bytes], int] = {}
        for message in sorted(messages, key=lambda m: (m.partition(), m.offset())):
            thing, quantity, time_ms = key_of(message).rsplit(b"|", 2)
            assert int(time_ms) > last.get((thing, quantity), -1)
            last[(thing, quantity)] = int(time_ms)
    return len(messages) - len(expected)


def replay(lane: Wiring, events: Path, tmp_path: Path, *args: str) -> None:
    sim = service_process(
        "simulator", lane, tmp_path / "simulator.log", "--input", str(events), *args
    ).start()
    assert sim.popen.wait(600) == 0, (tmp_path / "simulator.log").read_text()[-3000:]


def test_sample_replay_lands_exactly_in_order(
    stack_settings: Settings, lane: Wiring, tmp_path: Path
) -> None:
    service = start_bridge(lane, tmp_path / "bridge.log")
    try:
        replay(lane, SAMPLE, tmp_path)
        expected = len(expected_records(SAMPLE))
        assert (
            wait_for_count(stack_settings, lane.raw, expected, landing_limit_s(expected))
            >= expected
        )
        duplicates = assert_raw_topic_holds_exactly(stack_settings, lane, SAMPLE, check_order=True)
        assert duplicates == 0
    finally:
        assert service.terminate() == 0, "bridge did not exit 0 on SIGTERM"


def test_generated_file_replay_lands_exactly(
    stack_settings: Settings, lane: Wiring, tmp_path: Path
) -> None:
    events = tmp_path / "generated.json"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "simulator.generate",
            "-o",
            str(events),
            "--rows",
            "20000",
            "--things",
            "6",
            "--no-progress",
        ],
        cwd=REPO_ROOT,
        check=True,
    )
    service = start_bridge(lane, tmp_path / "bridge.log")
    try:
        replay(lane, events, tmp_path, "--connections", "2")
        expected = len(expected_records(events))
        assert (
            wait_for_count(stack_settings, lane.raw, expected, landing_limit_s(expected))
            >= expected
        )
        assert assert_raw_topic_holds_exactly(stack_settings, lane, events, check_order=True) == 0
    finally:
        service.terminate()


@pytest.mark.chaos
def test_bridge_killed_repeatedly_loses_nothing(
    stack_settings: Settings, lane: Wiring, tmp_path: Path
) -> None:
    """kill -9 at random moments of a paced replay; rows published meanwhile wait in the
    broker for the bridge's persistent session."""
    events = tmp_path / "generated.json"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "simulator.generate",
            "-o",
            str(events),
            "--rows",
            "30000",
            "--things",
            "5",
            "--seed",
            "11",
            "--no-progress",
        ],
        cwd=REPO_ROOT,
        check=True,
    )
    rng = random.Random(int(os.environ.get("BRIDGE_KILL_SEED", str(time.time_ns()))))
    log = tmp_path / "bridge.log"
    service = start_bridge(lane, log)
    sim = service_process(
        "simulator", lane, tmp_path / "simulator.log", "--input", str(events), "--rate", "4000"
    ).start()
    kills = sorted(rng.uniform(0.5, 6.0) for _ in range(KILL_ROUNDS))
    started = time.monotonic()
    for at in kills:
        time.sleep(max(0.0, started + at - time.monotonic()))
        service.kill9()
        time.sleep(rng.uniform(0.0, 1.0))
        service.start()
    print(f"killed the bridge (kill -9) at {[round(k, 2) for k in kills]} s")
    try:
        assert sim.popen.wait(600) == 0
        expected = set(expected_records(events))
        seen = wait_for_keys(stack_settings, lane.raw, expected, landing_limit_s(len(expected)))
        assert expected <= seen, f"{len(expected - seen)} missing; {log.read_text()[-3000:]}"
        duplicates = assert_raw_topic_holds_exactly(stack_settings, lane, events, check_order=False)
        print(f"identical re-sends after {KILL_ROUNDS} kills: {duplicates}")
    finally:
        service.terminate()


def _publish_all(settings: Settings, lane: Wiring, payloads: list[bytes]) -> float:
    publisher = RawPublisher(
        settings.acting_as("mqtt", "machine"), max_inflight=500, client_prefix=f"fuzz-{lane.prefix}"
    )
    started = time.perf_counter()
    for payload in payloads:
        publisher.publish_raw(f"{lane.prefix}/fuzz", payload)
    assert publisher.wait_all_acked(len(payloads))
    publisher.close()
    return started


def test_fuzzed_payloads_go_to_the_dlq_with_reasons(
    stack_settings: Settings, lane: Wiring, tmp_path: Path
) -> None:
    service = start_bridge(lane, tmp_path / "bridge.log")
    settings = stack_settings

    def good_rows(first_ms: int, count: int) -> list[bytes]:
        return [
            b'{"Thing": "F1", "Timestamp": %d, "vaTorque_C11": 1.5, "id": "r%d"}'
            % (first_ms + i, i)
            for i in range(count)
        ]

    def timed_batch(first_ms: int, expected_total: int) -> float:
        started = _publish_all(settings, lane, good_rows(first_ms, 3000))
        assert (
            wait_for_count(settings, lane.raw, expected_total, landing_limit_s(expected_total))
            >= expected_total
        )
        return time.perf_counter() - started

    try:
        before = timed_batch(1_554_000_000_000, 3000)
        rng = random.Random(5)
        fuzz = {
            "garbage": bytes(rng.getrandbits(8) for _ in range(300)),
            "truncated": b'{"Thing": "F1", "Timestamp": 1554000000000, "vaTorq',
            "huge": b'{"Thing": "F1", "Timestamp": 1554000000000, "pad": "'
            + b"x" * (10 * 1024 * 1024)
            + b'"}',
            "wrong_type": b'{"Thing": "F1", "Timestamp": 1554000000000, "vaTorque_C11": "high"}',
            "missing_thing": b'{"Timestamp": 1554000000000, "vaTorque_C11": 1.0}',
            "missing_time": b'{"Thing": "F1", "vaTorque_C11": 1.0}',
            "nan": b'{"Thing": "F1", "Timestamp": 1554000000000, "vaTorque_C11": NaN}',
            "array": b"[1, 2]",
            "empty": b"",
            # a device clock ten years ahead, and one outside what InfluxDB can store
            "future": b'{"Thing": "F1", "Timestamp": %d, "vaTorque_C11": 1.0}'
            % (int(time.time() * 1000) + 10 * 365 * 86_400_000),
            "out_of_range": b'{"Thing": "F1", "Timestamp": 99999999999, "vaTorque_C11": 1.0}',
            # inputs that once raised past the parser and killed paho's network thread (#14)
            "deep": b"[" * 50_000,
            "long_number": b'{"Thing": "F1", "Timestamp": 1554000000000, "vaTorque_C11": '
            + b"1" * 5000
            + b"}",
            "surrogate": b'{"Thing": "F\\ud800", "Timestamp": 1554000000000, "vaTorque_C11": 1.0}',
            "int_key": b"{'Thing': 'F1', 'Timestamp': 1554000000000, 1: 1.0}",
        }
        _publish_all(settings, lane, list(fuzz.values()))
        assert wait_for_count(settings, lane.dlq, len(fuzz), landing_limit_s(len(fuzz))) >= len(
            fuzz
        )
        after = timed_batch(1_554_100_000_000, 6000)
        assert service.alive(), "the bridge died on bad input"
        dlq = read_to_end(settings, lane.dlq)
        assert len(dlq) == len(fuzz)
        reasons = [header_of(m, "reason").decode() for m in dlq]
        assert reasons == [
            "not_utf8",
            "not_json",
            "payload_too_large",
            "bad_quantity",
            "missing_thing",
            "missing_timestamp",
            "bad_quantity",
            "not_object",
            "not_json",
            "future_timestamp",
            "timestamp_out_of_range",
            "too_deep",
            "bad_number",
            "bad_thing",
            "bad_quantity_name",
        ]
        huge = dlq[2]
        assert (
            int(header_of(huge, "payload_bytes")) == len(fuzz["huge"])
            and len(value_of(huge)) == 64 * 1024
        )
        assert [m.value() for i, m in enumerate(dlq) if i != 2] == [
            v for k, v in fuzz.items() if k != "huge"
        ]
        # Throughput unaffected: the batch after the fuzz takes at most twice the one before
        # (generous: a shared 2-core machine), and nothing of it is lost.
        assert after < 2 * before + 2, (before, after)
    finally:
        service.terminate()
