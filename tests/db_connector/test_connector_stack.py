"""Kafka -> db_connector -> InfluxDB on the real stack: exact, idempotent, robust.

Every test has private topics, consumer group and InfluxDB database. The records fed are the
real sample split by the bridge's own code, plus records of every other kind encoded with the
Spark jobs' own encoders, plus bad ones; the oracle is computed from what was fed.
"""

from __future__ import annotations

import math
import os
import random
import threading
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from db_connector.lineprotocol import NS_PER_MS
from db_connector.points import joined_time_and_tags
from mqtt_bridge.records import RowSplitter
from stacktools.harness.processes import ServiceProcess
from stacktools.harness.services import service_process
from stacktools.harness.wiring import Wiring
from stacktools.stack import Stack
from stacktools.stack.influx import InfluxClient
from stacktools.stack.settings import Settings
from streamkit.events import parse_row
from streamkit.kafka_clients import client_config, idempotent_producer
from streamkit.kafka_io import high_watermarks, read_to_end, retry_transient
from streamkit.paths import REPO_ROOT
from streamkit.wire import MeasurementEncoder, aggregate_key, record_key
from streamkit.wire.retention import source
from tests.support.avro import FlatRecordEncoder
from tests.support.harness import metric
from tests.support.messages import header_of
from tests.support.waits import settle

pytestmark = pytest.mark.stack
SAMPLE = REPO_ROOT / "tests" / "data" / "test_events.json"
KILL_ROUNDS = int(os.environ.get("CONNECTOR_KILL_ROUNDS", "3"))
#: A week far from the sample's, where a pre-written integer "value" makes float values conflict
#: (InfluxDB checks field types per shard, and shards are a week long).
CONFLICT_MS = 978_307_200_000  # 2001-01-01


@dataclass
class Feed:
    """What was produced, by kind, and the oracle of what InfluxDB must then hold."""

    records: dict[str, list[tuple[bytes | None, bytes, int | None]]] = field(default_factory=dict)
    raw_points: dict[tuple[str, str, int], float] = field(default_factory=dict)
    joined_ids: set[str] = field(default_factory=set)
    aggregate_keys: set[tuple] = field(default_factory=set)
    late_keys: set[tuple] = field(default_factory=set)
    bad: dict[str, int] = field(default_factory=dict)  # dead-letter reason -> count

    def add(self, kind: str, key: bytes | None, value: bytes, partition: int | None = None) -> None:
        self.records.setdefault(kind, []).append((key, value, partition))


def sample_feed(partitions: int = 2, *, duplicates: bool = True) -> Feed:
    feed = Feed()
    splitter = RowSplitter(partitions)
    rows = [parse_row(line) for line in SAMPLE.read_bytes().splitlines() if line.strip()]
    for row in rows:
        for record in splitter.split(row):
            feed.add("raw", record.key, record.value, record.partition)
        for quantity, measured in row.quantities.items():
            feed.raw_points[(row.thing, quantity, row.timestamp_ms * NS_PER_MS)] = measured
    if duplicates:  # re-sends, as a restarted bridge makes them: same key, same bytes
        for key, value, partition in random.Random(1).sample(feed.records["raw"], 500):
            feed.add("raw", key, value, partition)
    add_bad_records(feed)
    add_derived_records(feed, rows[0].thing)
    return feed


def add_bad_records(feed: Feed) -> None:
    encoder = MeasurementEncoder()
    feed.add("raw", b"garbage", b"\x99\x01not avro")
    feed.add(
        "raw",
        b"nan",
        encoder.encode_row("T-nan", "r1", 1_600_000_000_000, {"speed": math.nan})[0][1],
    )
    feed.add(
        "raw", b"empty-thing", encoder.encode_row("", "r2", 1_600_000_000_000, {"speed": 1.0})[0][1]
    )
    feed.add(
        "raw",
        b"conflict",
        encoder.encode_row("T-conflict", "r3", CONFLICT_MS + 1000, {"speed": 2.5})[0][1],
    )
    # names the bridge refuses, written by someone else: never a tag, a dead letter with the
    # bridge's reason
    feed.add(
        "raw",
        b"slash-thing",
        encoder.encode_row("M1/+", "r4", 1_600_000_000_000, {"speed": 1.0})[0][1],
    )
    base = 1_700_000_000_000
    feed.add(
        "aggregates",
        b"pipe-quantity",
        FlatRecordEncoder("aggregate").encode(
            (
                "T1",
                "a|b",
                "tumbling",
                10_000,
                10_000,
                base,
                base + 10_000,
                3,
                1.0,
                0.5,
                1.5,
                None,
                None,
            )
        ),
    )
    feed.add(
        "late",
        b"control-thing",
        FlatRecordEncoder("late").encode(
            ("T\x00", "a", base, 1.0, "row-1", "behind_watermark", "join", None)
        ),
    )
    feed.add(
        "joined",
        b"backslash-quantity",
        FlatRecordEncoder("joined").encode(
            ("id", "T1", "a\\", "b", base, base, 2.0, 3.0, "mechanical_power", 6.0, base)
        ),
    )
    feed.bad = {
        "undecodable": 1,
        "non_finite_value": 1,
        "bad_thing": 3,
        "bad_quantity_name": 2,
        "influx_rejected": 1,
    }
    # a name the rule allows with everything the line protocol escapes: read back unchanged
    thing, quantity = 'Fräse 3,a=b "x"', "power/kW"
    feed.add(
        "raw",
        b"tricky-names",
        encoder.encode_row(thing, "r5", 1_600_000_000_000, {quantity: 4.5})[0][1],
    )
    feed.raw_points[(thing, quantity, 1_600_000_000_000 * NS_PER_MS)] = 4.5


def add_derived_records(feed: Feed, thing: str) -> None:
    """Joined pairs that share max(left, right) (the discriminator's case) and one with a long
    gap; aggregates with and without stddev; late records of two stages."""
    joined, aggregate, late = (
        FlatRecordEncoder("joined"),
        FlatRecordEncoder("aggregate"),
        FlatRecordEncoder("late"),
    )
    base = 1_700_000_000_000
    pairs = [
        (base + 5000, base + 3000),
        (base + 5000, base + 4000),
        (base + 5000, base + 5000),
        (base + 4000, base + 5000),
        (base + 10_000, base + 10_000 + 900_000),
    ]
    for left, right in pairs:
        pair_id = f"{thing}|a:b|{left}|{right}"
        feed.add(
            "joined",
            pair_id.encode(),
            joined.encode(
                (
                    pair_id,
                    thing,
                    "a",
                    "b",
                    left,
                    right,
                    2.0,
                    3.0,
                    "mechanical_power",
                    6.0,
                    max(left, right),
                )
            ),
        )
        feed.joined_ids.add(pair_id)
    for start, stddev in ((base, 0.5), (base + 10_000, None)):
        for quantity in ("a", "b"):
            feed.add(
                "aggregates",
                aggregate_key(thing, quantity, "tumbling-10000", start),
                aggregate.encode(
                    (
                        thing,
                        quantity,
                        "tumbling",
                        10_000,
                        10_000,
                        start,
                        start + 10_000,
                        3,
                        1.0,
                        0.5,
                        1.5,
                        stddev,
                        start + 25_000 if stddev is None else None,
                    )
                ),
            )
            feed.aggregate_keys.add((thing, quantity, "tumbling-10000", start * NS_PER_MS))
    for stage in ("join", "aggregate"):
        feed.add(
            "late",
            record_key(thing, "a", base),
            late.encode((thing, "a", base, 1.0, "row-1", "behind_watermark", stage, base + 5000)),
        )
        feed.late_keys.add((thing, "a", stage, base * NS_PER_MS))


def produce(
    settings: Settings,
    topics: dict[str, str],
    records: list[tuple[str, bytes | None, bytes, int | None]],
) -> None:
    producer = idempotent_producer(settings, "connector-test-feed")
    for kind, key, value, partition in records:
        if partition is None:
            producer.produce(topics[kind], value, key)
        else:
            producer.produce(topics[kind], value, key, partition=partition)
        producer.poll(0)
    assert producer.flush(60) == 0


def all_records(feed: Feed) -> list[tuple[str, bytes | None, bytes, int | None]]:
    return [(kind, *record) for kind, records in feed.records.items() for record in records]


def group_of(database: str) -> str:
    """The connector's group (and transactional id) in these tests: under its own ACL prefix."""
    return f"db-connector-{database}"


def start(
    settings: Settings, topics: dict[str, str], database: str, log: Path, *extra: str
) -> ServiceProcess:
    return service_process(
        "db_connector", Wiring.for_connector(topics, group_of(database), database), log, *extra
    ).start()


def write_conflict_seed(settings: Settings, database: str) -> None:
    """An integer "value" in the conflict week: the float record there must be refused."""
    line = f"raw,quantity=speed,thing=T-conflict value=1i {CONFLICT_MS * NS_PER_MS}"
    assert InfluxClient(settings).write(database, [line]) == 204


def raw_points(settings: Settings, database: str) -> dict[tuple[str, str, int], float]:
    rows = InfluxClient(settings).rows(
        database, f'SELECT "value" FROM {source("raw")} WHERE time > 0 GROUP BY *'
    )
    return {
        (r["thing"], r["quantity"], r["time"]): r["value"]
        for r in rows
        if r["thing"] != "T-conflict"
    }


def count(settings: Settings, database: str, measurement: str) -> int:
    rows = InfluxClient(settings).rows(database, f"SELECT count(*) FROM {source(measurement)}")
    return max((v for r in rows for k, v in r.items() if k.startswith("count_")), default=0)


def wait_until_exact(
    settings: Settings, database: str, feed: Feed, service: ServiceProcess | None, timeout_s: float
) -> None:
    got: dict = {}

    def landed() -> bool:
        nonlocal got
        got = raw_points(settings, database)
        if len(got) >= len(feed.raw_points) and count(settings, database, "late") >= len(
            feed.late_keys
        ):
            return True
        assert service is None or service.alive(), "the connector died"
        return False

    settle(landed, timeout_s, "the feed's points in InfluxDB")
    assert len(got) == len(feed.raw_points), (
        f"{len(got)} raw points, expected {len(feed.raw_points)}"
    )


def assert_influx_equals_oracle(
    settings: Settings, database: str, feed: Feed, dlq_topic: str
) -> None:
    assert raw_points(settings, database) == feed.raw_points
    joined = InfluxClient(settings).rows(database, f"SELECT * FROM {source('joined')}")
    assert {
        f"{r['thing']}|{r['pair']}|{r['left_time_ms']}|{r['right_time_ms']}" for r in joined
    } == feed.joined_ids
    assert len(joined) == len(feed.joined_ids)
    for row in joined:
        assert row["time"] == joined_time_and_tags(row["left_time_ms"], row["right_time_ms"])[0]
        assert (row["result"], row["result_name"]) == (6.0, "mechanical_power")
    assert [r for r in joined if r["long_gap_ms"]] and all(
        int(r["long_gap_ms"]) == r["right_time_ms"] - r["left_time_ms"]
        for r in joined
        if r["long_gap_ms"]
    )
    aggregates = InfluxClient(settings).rows(database, f"SELECT * FROM {source('aggregate')}")
    assert {
        (r["thing"], r["quantity"], r["window"], r["time"]) for r in aggregates
    } == feed.aggregate_keys
    assert len(aggregates) == len(feed.aggregate_keys)
    assert sorted(r["stddev"] is None for r in aggregates) == [False, False, True, True]
    assert sorted(r["closed_at_ms"] is None for r in aggregates) == [False, False, True, True]
    late = InfluxClient(settings).rows(database, f"SELECT * FROM {source('late')}")
    assert {(r["thing"], r["quantity"], r["stage"], r["time"]) for r in late} == feed.late_keys
    # dead letters: each bad record exactly once in Kafka, with its reason, and as a point
    letters = read_to_end(settings, dlq_topic)
    reasons: dict[str, int] = {}
    for message in letters:
        reason = header_of(message, "reason").decode()
        reasons[reason] = reasons.get(reason, 0) + 1
    assert reasons == feed.bad
    assert count(settings, database, "dead_letter") == len(letters)


def data_ends(settings: Settings, topic: str) -> dict[int, int]:
    """Each partition's offset just past its last data record (a transaction's closing marker
    may follow: it is never handed to a consumer, so nothing commits past it)."""
    passed: dict[int, int] = {}
    for message in read_to_end(settings, topic):
        partition, offset = message.partition(), message.offset()
        assert partition is not None and offset is not None  # a consumed record has both
        passed[partition] = max(passed.get(partition, 0), offset + 1)
    return passed


def offsets_behind(
    settings: Settings, group: str, topics: dict[str, str]
) -> dict[str, tuple[dict, dict]]:
    """The topics whose data records the group has not all committed: {topic: (committed,
    data ends)}; empty when it has consumed everything. The committed offsets are read first and
    the ends after them, so a match means that every record there by then had been written to
    InfluxDB and committed (the connector commits only after InfluxDB acknowledged), and with
    it every dead letter of it (committed in the same transaction as the offsets passing it)."""
    consumer = Consumer({**client_config(settings, group), "group.id": group})
    try:
        committed = {}
        for topic in topics.values():
            partitions = [TopicPartition(topic, p) for p in high_watermarks(settings, topic)]
            # never committed: OFFSET_INVALID
            committed[topic] = {
                c.partition: c.offset
                for c in retry_transient(partial(consumer.committed, partitions, timeout=30))
                if c.offset >= 0
            }
    finally:
        consumer.close()
    ends = {topic: data_ends(settings, topic) for topic in topics.values()}
    return {
        topic: (committed[topic], ends[topic])
        for topic in topics.values()
        if committed[topic] != ends[topic]
    }


def wait_consumed_to_end(
    settings: Settings, group: str, topics: dict[str, str], timeout_s: float
) -> None:
    """Until the connector's own progress (its committed offsets) has reached the end of every
    topic, the dead-letter topic included: after that anything extra in InfluxDB would already
    be there, so an assertion of "nothing more" is a check, not a guess about speed."""
    behind: dict[str, tuple[dict, dict]] = {}

    def caught_up() -> bool:
        nonlocal behind
        behind = offsets_behind(settings, group, topics)
        return not behind

    settle(caught_up, timeout_s, "the connector's commits at the end of its topics", interval_s=2.0)
    assert not behind, f"not consumed to the end, {{topic: (committed, data ends)}}: {behind}"


def assert_offsets_committed(settings: Settings, group: str, topics: dict[str, str]) -> None:
    """The group's committed offsets pass every data record."""
    assert offsets_behind(settings, group, topics) == {}


def test_replay_lands_exactly_with_dead_letters(lane, tmp_path: Path) -> None:
    settings, topics, database = lane
    feed = sample_feed()
    produce(settings, topics, all_records(feed))
    # nothing consumed yet, and so seen: the wait for the connector's commits is not vacuous
    assert set(offsets_behind(settings, group_of(database), topics)) == {
        t for k, t in topics.items() if k != "dlq"
    }
    service = start(settings, topics, database, tmp_path / "connector.log")
    try:
        wait_until_exact(settings, database, feed, service, 120)
        # the dead letters' own points take one more round trip through the DLQ topic
        wait_consumed_to_end(settings, group_of(database), topics, 120)
        assert_influx_equals_oracle(settings, database, feed, topics["dlq"])
    finally:
        assert service.terminate() == 0, (tmp_path / "connector.log").read_text()[-3000:]
    assert '"connector stopped"' in (tmp_path / "connector.log").read_text()
    assert_offsets_committed(settings, group_of(database), topics)


def feed_in_chunks(
    settings: Settings, topics: dict[str, str], feed: Feed, chunks: int, pause_s: float
) -> threading.Thread:
    records = all_records(feed)
    size = math.ceil(len(records) / chunks)

    def run() -> None:
        for start_index in range(0, len(records), size):
            produce(settings, topics, records[start_index : start_index + size])
            # the feed's pace: records keep arriving while the connector is killed
            time.sleep(pause_s)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.mark.chaos
def test_connector_killed_repeatedly_stays_exact(lane, tmp_path: Path) -> None:
    settings, topics, database = lane
    feed = sample_feed()
    feeder = feed_in_chunks(settings, topics, feed, chunks=20, pause_s=0.4)
    rng = random.Random(int(os.environ.get("CONNECTOR_KILL_SEED", "7")))
    log = tmp_path / "connector.log"
    small = ("--batch-points", "300", "--flush-interval", "50ms")
    service = start(settings, topics, database, log, *small)
    faults = []
    for round_ in range(KILL_ROUNDS):
        time.sleep(rng.uniform(1.0, 3.0))  # the scenario: a kill at a random moment of the replay
        faults.append((round_, len(raw_points(settings, database))))
        service.kill9()
        service = start(settings, topics, database, log, *small)
    print(f"kill -9 of the connector at (round, raw points in InfluxDB): {faults}")
    feeder.join(300)  # a hang detector: the feed is 20 chunks 0.4 s apart
    assert not feeder.is_alive(), "the feed did not finish"
    try:
        wait_until_exact(settings, database, feed, service, 180)
        wait_consumed_to_end(settings, group_of(database), topics, 180)
        assert_influx_equals_oracle(settings, database, feed, topics["dlq"])
    finally:
        assert service.terminate() == 0, log.read_text()[-3000:]
    assert any(points < len(feed.raw_points) for _, points in faults), (
        "no kill hit the connector mid-replay"
    )


@pytest.mark.chaos
def test_influxdb_outage_loses_nothing(lane, tmp_path: Path) -> None:
    settings, topics, database = lane
    feed = sample_feed(duplicates=False)
    records = all_records(feed)
    half = len(records) // 2
    produce(settings, topics, records[:half])
    log = tmp_path / "connector.log"
    service = start(settings, topics, database, log, "--retry-max", "1s")
    port = int(service.args[service.args.index("--metrics-port") + 1])
    influx = Stack(settings, ["influxdb"])
    try:
        settle(
            lambda: raw_points(settings, database),
            60,
            "the first points in InfluxDB",
            interval_s=0.5,
        )
        influx.down()
        produce(settings, topics, records[half:])
        settle(
            lambda: metric(port, "connector_write_retries_total") >= 3,
            30,
            "three write retries",
            interval_s=0.5,
        )
        assert metric(port, "connector_influx_available") == 0
        assert metric(port, "connector_write_retries_total") >= 3
        assert service.alive()
    finally:
        influx.up()
    try:
        wait_until_exact(settings, database, feed, service, 120)
        wait_consumed_to_end(settings, group_of(database), topics, 120)
        assert_influx_equals_oracle(settings, database, feed, topics["dlq"])
        assert metric(port, "connector_influx_available") == 1
    finally:
        assert service.terminate() == 0, log.read_text()[-3000:]
