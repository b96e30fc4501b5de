"""python -m spark_jobs.aggregate on the real stack against a pandas reference of the same rules.

Input comes in two committed transactions, each read as one micro-batch (maxOffsetsPerTrigger
is larger than either), so the watermark every record is compared with is known exactly:
phase 1 (the real sample) meets watermark 0; phase 2 meets W1 = max(phase 1) - delay.
"""
from __future__ import annotations

import math
import re
import time
import urllib.request
import uuid
import zlib
from pathlib import Path

import pandas as pd
import pytest

from streamkit.avro_codec import AvroCodec
from streamkit.config import Settings
from streamkit.events import parse_row
from streamkit.harness import REPO, new_lane
from tests.spark.helpers import log_tail, private_topic, produce_committed, read_to_end, spark_service

pytestmark = pytest.mark.stack
SAMPLE = REPO / "tests" / "data" / "test_events.json"
DELAY_MS = 10_000
TUMBLING_MS = 10_000
SLIDING_MS, SLIDE_MS = 60_000, 20_000


def sample_measurements() -> list[dict]:
    """What the bridge makes of the sample: one record per quantity, last write per key wins."""
    records: dict[tuple, dict] = {}
    for line in SAMPLE.read_bytes().splitlines():
        if line.strip():
            row = parse_row(line)
            for quantity, value in row.quantities.items():
                records[(row.thing, quantity, row.timestamp_ms)] = {
                    "thing": row.thing, "quantity": quantity, "event_time_ms": row.timestamp_ms,
                    "value": float(value), "row_id": row.row_id}
    return list(records.values())


def windows_of(t: int, size: int, slide: int) -> list[int]:
    """Written independently of the job: every aligned start s with s <= t < s + size."""
    first = (t - size) // slide * slide + slide
    return [s for s in range(first, t + 1, slide) if s <= t < s + size]


def reference(phases: list[list[dict]], delay_ms: int) -> tuple[dict[bytes, dict], set[bytes], int]:
    """Expected aggregates by key, late keys, and the final watermark."""
    watermark, on_time, late = 0, [], set()
    for phase in phases:
        for record in phase:
            if record["event_time_ms"] < watermark:
                late.add(f"{record['thing']}|{record['quantity']}|{record['event_time_ms']}".encode())
            else:
                on_time.append(record)
        watermark = max(watermark, max(r["event_time_ms"] for r in phase) - delay_ms)
    rows = []
    for record in on_time:
        for label, size, slide in ((f"tumbling-{TUMBLING_MS}", TUMBLING_MS, TUMBLING_MS),
                                   (f"sliding-{SLIDING_MS}-{SLIDE_MS}", SLIDING_MS, SLIDE_MS)):
            for start in windows_of(record["event_time_ms"], size, slide):
                rows.append((record["thing"], record["quantity"], label, size, start, record["value"]))
    frame = pd.DataFrame(rows, columns=["thing", "quantity", "label", "size", "start", "value"])
    frame = frame[frame["start"] + frame["size"] <= watermark]
    stats = frame.groupby(["thing", "quantity", "label", "size", "start"])["value"].agg(
        ["count", "mean", "min", "max", "std"]).reset_index()
    expected = {}
    for r in stats.itertuples(index=False):
        key = f"{r.thing}|{r.quantity}|{r.label}|{r.start}".encode()
        expected[key] = {"window_start_ms": r.start, "window_end_ms": r.start + r.size, "count": r.count,
                         "mean": r.mean, "min": r.min, "max": r.max, "stddev": None if r.count == 1 else r.std}
    return expected, late, watermark


def produce_measurements(settings: Settings, topic: str, records: list[dict], partitions: int) -> None:
    codec = AvroCodec("measurement")
    produce_committed(settings, [
        (topic, f"{r['thing']}|{r['quantity']}|{r['event_time_ms']}".encode(), codec.encode(r),
         zlib.crc32(r["thing"].encode()) % partitions) for r in records])


def wait_committed(settings: Settings, topic: str, count: int, service, log: Path, timeout_s: float = 240) -> list:
    deadline = time.monotonic() + timeout_s
    messages: list = []
    while time.monotonic() < deadline:
        assert service.alive(), f"job died: {log_tail(log)}"
        messages = read_to_end(settings, topic)
        if len(messages) >= count:
            return messages
        time.sleep(2)
    raise AssertionError(f"{topic}: {len(messages)} of {count} records after {timeout_s}s: {log_tail(log)}")


def test_aggregate_job_matches_pandas_reference(stack_settings: Settings, tmp_path: Path) -> None:
    lane = new_lane(stack_settings)
    partitions = stack_settings.topic_partitions
    aggregates, late_topic = private_topic(stack_settings, "agg", 2), private_topic(stack_settings, "late", 2)
    markers = private_topic(stack_settings, "markers", 1, compact=True)
    phase1 = sorted(sample_measurements(), key=lambda r: r["event_time_ms"])
    w1 = max(r["event_time_ms"] for r in phase1) - DELAY_MS
    thing, quantity = phase1[-1]["thing"], phase1[-1]["quantity"]

    def extra(t: int, q: str = quantity) -> dict:
        return {"thing": thing, "quantity": q, "event_time_ms": t, "value": float(t % 1000), "row_id": str(uuid.uuid4())}

    phase2 = [extra(w1 - 3_600_000), extra(w1 - 1, "lateProbe"),  # late: far behind; just behind (window open)
              extra(w1, "lateProbe"),                              # exactly at the watermark: on time
              extra(w1 + 3_600_000)]                               # moves the watermark: closes every earlier window
    expected1, late1, _ = reference([phase1], DELAY_MS)
    expected, late, final_watermark = reference([phase1, phase2], DELAY_MS)
    assert late1 == set() and len(late) == 2 and final_watermark == w1 + 3_600_000 - DELAY_MS

    resent = phase1[::200]  # the bridge re-sends after a restart: same records again, must count once
    produce_measurements(stack_settings, lane.raw_topic, phase1 + resent, partitions)
    log = tmp_path / "aggregate.log"
    query = f"agg-{uuid.uuid4().hex[:8]}"
    service = spark_service("spark_jobs.aggregate", [
        "--raw-topic", lane.raw_topic, "--aggregates-topic", aggregates, "--late-topic", late_topic,
        "--marker-topic", markers, "--query-name", query,
        "--checkpoint-dir", str(tmp_path / "checkpoint"), "--tumbling", f"{TUMBLING_MS}ms",
        "--sliding", f"{SLIDING_MS // 1000}s/{SLIDE_MS // 1000}s", "--watermark-delay", f"{DELAY_MS // 1000}s",
        "--trigger-seconds", "0.5"], log).start()
    metrics_port = int(service.args[service.args.index("--metrics-port") + 1])
    try:
        wait_committed(stack_settings, aggregates, len(expected1), service, log)
        produce_measurements(stack_settings, lane.raw_topic, phase2, partitions)
        wait_committed(stack_settings, late_topic, len(late) + len(resent), service, log)
        messages = wait_committed(stack_settings, aggregates, len(expected), service, log)
        time.sleep(3)  # anything beyond the expected output would show up now
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
    finally:
        code = service.terminate(120)
    assert code == 0, f"SIGTERM exit {code}: {log_tail(log)}"

    messages = read_to_end(stack_settings, aggregates)
    codec = AvroCodec("aggregate")
    got = {}
    for message in messages:
        assert message.key() not in got, f"duplicate window {message.key()!r}"
        got[message.key()] = codec.decode(message.value())
        assert message.partition() == zlib.crc32(got[message.key()]["thing"].encode()) % 2
    assert set(got) == set(expected), (sorted(set(expected) - set(got))[:3], sorted(set(got) - set(expected))[:3])
    for key, want in expected.items():
        have = got[key]
        for field in ("window_start_ms", "window_end_ms", "count", "min", "max"):
            assert have[field] == want[field], (key, field, have[field], want[field])
        assert math.isclose(have["mean"], want["mean"], rel_tol=1e-9, abs_tol=1e-12), key
        if want["stddev"] is None:
            assert have["stddev"] is None, key
        else:
            assert math.isclose(have["stddev"], want["stddev"], rel_tol=1e-7, abs_tol=1e-9), key

    late_messages = read_to_end(stack_settings, late_topic)
    late_codec = AvroCodec("late")
    by_reason: dict[str, list] = {}
    for message in late_messages:
        record = late_codec.decode(message.value())
        by_reason.setdefault(record["reason"], []).append((message.key(), record))
    assert {key for key, _ in by_reason["behind_watermark"]} == late and len(by_reason["behind_watermark"]) == len(late)
    assert all((r["stage"], r["watermark_ms"]) == ("aggregate", w1) for _, r in by_reason["behind_watermark"])
    resent_keys = sorted(f"{r['thing']}|{r['quantity']}|{r['event_time_ms']}".encode() for r in resent)
    assert sorted(key for key, _ in by_reason["duplicate"]) == resent_keys
    assert set(by_reason) == {"behind_watermark", "duplicate"}

    def metric(name: str, labels: str) -> float:
        match = re.search(rf"^{name}{{{labels}}} (\S+)$", metrics, re.M)
        assert match, f"{name}{{{labels}}} missing from /metrics: " + "\n".join(
            line for line in metrics.splitlines() if line.startswith(name))
        return float(match.group(1))

    assert metric("eos_transactions_total", f'outcome="committed",query="{query}"') >= 3  # phase 1, late, phase 2
    assert metric("eos_transactions_total", f'outcome="aborted",query="{query}"') == 0
    assert metric("spark_watermark_seconds", f'query="{query}"') == final_watermark / 1000
    assert metric("spark_input_rows_total", f'query="{query}"') == len(phase1) + len(resent) + len(phase2)


def test_aggregates_of_the_joined_power(stack_settings: Settings, tmp_path: Path) -> None:
    """--source joined: each join result (here mechanical_power) aggregated as a quantity of its
    own, under the joined stream's own watermark."""
    from spark_jobs.lsb import JoinConfig, LocalStreamBuffer

    buffer = LocalStreamBuffer(JoinConfig.single("actSpeed_C11", "vaTorque_C11"))
    pairs = []
    for r in sorted(sample_measurements(), key=lambda r: r["event_time_ms"]):
        if r["quantity"] in ("actSpeed_C11", "vaTorque_C11"):
            pairs.extend(buffer.push(r["thing"], r["quantity"], r["event_time_ms"], r["value"]).pairs)
    pairs.sort(key=lambda p: p.event_time)
    assert len(pairs) > 1000
    as_measurements = [{"thing": p.key, "quantity": "mechanical_power", "event_time_ms": p.event_time,
                        "value": p.result, "row_id": p.id} for p in pairs]
    last = as_measurements[-1]
    closer = {**last, "event_time_ms": last["event_time_ms"] + 3_600_000, "row_id": "closer"}
    expected, late, _ = reference([as_measurements, [closer]], DELAY_MS)
    assert expected and not late

    joined = private_topic(stack_settings, "joined", 1)
    codec = AvroCodec("joined")

    def joined_record(m: dict) -> tuple:
        value = codec.encode({"id": m["row_id"], "thing": m["thing"], "left_quantity": "actSpeed_C11",
                              "right_quantity": "vaTorque_C11", "left_time_ms": m["event_time_ms"],
                              "right_time_ms": m["event_time_ms"], "left_value": 0.0, "right_value": 0.0,
                              "result_name": "mechanical_power", "result": m["value"],
                              "event_time_ms": m["event_time_ms"]})
        return (joined, m["row_id"].encode(), value, 0)

    produce_committed(stack_settings, [joined_record(m) for m in as_measurements])
    produce_committed(stack_settings, [joined_record(closer)])
    aggregates, late_topic = private_topic(stack_settings, "agg", 2), private_topic(stack_settings, "late", 2)
    log = tmp_path / "aggregate.log"
    service = spark_service("spark_jobs.aggregate", [
        "--source", "joined", "--joined-topic", joined, "--aggregates-topic", aggregates, "--late-topic", late_topic,
        "--marker-topic", private_topic(stack_settings, "markers", 1, compact=True),
        "--query-name", f"aggj-{uuid.uuid4().hex[:8]}", "--checkpoint-dir", str(tmp_path / "checkpoint"),
        "--tumbling", f"{TUMBLING_MS}ms", "--sliding", f"{SLIDING_MS // 1000}s/{SLIDE_MS // 1000}s",
        "--watermark-delay", f"{DELAY_MS // 1000}s", "--max-offsets-per-trigger", str(len(as_measurements)),
        "--available-now"], log).start()
    assert service.process.wait(600) == 0, log_tail(log)
    codec_out = AvroCodec("aggregate")
    got = {m.key(): codec_out.decode(m.value()) for m in read_to_end(stack_settings, aggregates)}
    assert set(got) == set(expected), (sorted(set(expected) - set(got))[:3], sorted(set(got) - set(expected))[:3])
    for key, want in expected.items():
        assert got[key]["count"] == want["count"] and math.isclose(got[key]["mean"], want["mean"], rel_tol=1e-9,
                                                                   abs_tol=1e-9), key
    assert read_to_end(stack_settings, late_topic) == []
