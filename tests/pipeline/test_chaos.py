"""End-to-end exactly-once under faults: one replay through the whole pipeline while the bridge,
both Spark drivers and the connector are killed with SIGKILL at random points and the Kafka
broker is restarted once. Every stage is supervised (restarted when it is not running), as
systemd or compose would. At the end the committed Kafka outputs and InfluxDB must equal what
an oracle computes offline from the same file: 0 lost, 0 duplicated. The windows and the
aggregate job's late records must equal the window oracle over the raw topic in arrival order
(re-sends included), whatever the faults did to the batches. One fault stops the aggregate job
for a minute, so it catches up with large, skewed batches.

Knobs: CHAOS_KILLS_PER_STAGE (2), CHAOS_SEED (random; printed), CHAOS_ROWS (12000),
CHAOS_AGGREGATE_PAUSE_S (60).
"""
from __future__ import annotations

import json
import math
import os
import random
import time
from collections import Counter
from pathlib import Path

import pytest

from simulator.generate import generate
from spark_jobs.join import JoinSettings
from streamkit.avro_codec import AvroCodec
from streamkit.config import Settings
from streamkit.harness import drop_database, expected_records, read_topic
from streamkit.pipeline import STAGES, Pipeline, Wiring
from streamkit.stack import Stack
from streamkit.stack.process import StackError
from tests.pipeline.influx_checks import committed_identities, influx_identities
from tests.oracles import distinct_records, file_rows, join_pairs
from tests.window_oracle import Expected, Spec, window_oracle

pytestmark = pytest.mark.stack
KILLS_PER_STAGE = int(os.environ.get("CHAOS_KILLS_PER_STAGE", "2"))
ROWS = int(os.environ.get("CHAOS_ROWS", "12000"))
THINGS = 20
RATE = 150  # rows/s: the replay lasts long enough for every fault to hit it mid-stream
WINDOW_MS, LATENESS_MS = 10_000, 60_000
AGGREGATE_PAUSE_S = float(os.environ.get("CHAOS_AGGREGATE_PAUSE_S", "60"))
PAIRS = "actSpeed_C11:vaTorque_C11:mechanical_power"


def write_events(path: Path) -> Path:
    with path.open("w") as handle:
        for row in generate(ROWS, THINGS, seed=11):
            handle.write(json.dumps(row) + "\n")
    return path


def join_oracle(settings: Settings, records: list[tuple[str, str, int, float]]) -> Counter:
    """The join test's oracle (the library's per-record path) on these records."""
    return join_pairs(JoinSettings.from_sources(cli={"run_dir": settings.run_dir, "pairs": PAIRS}), records)[0]


def window_expectation(settings: Settings, raw_topic: str) -> Expected:
    """The window oracle over what the raw topic holds, each key in arrival order."""
    codec = AvroCodec("measurement")
    arrival = []
    for message in read_topic(settings, raw_topic):
        r = codec.decode(message.value())
        arrival.append((r["thing"], r["quantity"], r["event_time_ms"], r["value"], r["row_id"]))
    return window_oracle(arrival, [Spec("tumbling", WINDOW_MS, WINDOW_MS)], LATENESS_MS)


def aggregate_late(settings: Settings, late_topic: str) -> Counter:
    codec = AvroCodec("late")
    late: Counter = Counter()
    for message in read_topic(settings, late_topic):
        r = codec.decode(message.value())
        if r["stage"] == "aggregate":
            late[(r["thing"], r["quantity"], r["event_time_ms"], r["row_id"], r["reason"])] += 1
    return late


def committed_pairs(settings: Settings, topic: str) -> Counter:
    codec = AvroCodec("joined")
    pairs: Counter = Counter()
    for message in read_topic(settings, topic):
        r = codec.decode(message.value())
        pairs[(r["thing"], r["left_quantity"], r["right_quantity"], r["left_time_ms"], r["right_time_ms"])] += 1
    return pairs


def committed_windows(settings: Settings, topic: str) -> tuple[dict[str, tuple], int]:
    codec = AvroCodec("aggregate")
    windows, messages = {}, read_topic(settings, topic)
    for message in messages:
        r = codec.decode(message.value())
        windows[message.key().decode()] = (r["count"], r["min"], r["max"], r["mean"])
    return windows, len(messages)


def oracle_windows(expected: Expected) -> dict[str, tuple]:
    return {"|".join(map(str, key)): (w["count"], w["min"], w["max"], w["mean"])
            for key, w in expected.windows.items()}


def windows_equal(got: dict[str, tuple], want: dict[str, tuple]) -> bool:
    """Counts, minima and maxima exact, means to rounding (the oracle sums exactly)."""
    return got.keys() == want.keys() and all(
        got[k][:3] == want[k][:3] and math.isclose(got[k][3], want[k][3], rel_tol=1e-12, abs_tol=1e-12) for k in want)


def restart_broker(kafka: Stack, attempts: int = 3) -> None:
    """Start the broker again; on a loaded machine the old JVM may hold its port a moment
    longer, and a broker left down would fail every later test."""
    for attempt in range(attempts):
        try:
            kafka.up()
            return
        except StackError:
            if attempt == attempts - 1:
                raise
            time.sleep(5)


@pytest.fixture
def pipeline(stack_settings: Settings, tmp_path: Path):
    wiring = Wiring.private(stack_settings)
    run = Pipeline(stack_settings, wiring, tmp_path / "run", extra_args={
        "spark_join": ["--pairs", PAIRS, "--shuffle-partitions", "2", "--trigger-seconds", "1"],
        # no idle timeout: the windows are then a function of the raw topic alone, whatever the
        # faults did to the timing (the idle timeout has its own test in tests/spark)
        "spark_aggregate": ["--tumbling", f"{WINDOW_MS}ms", "--sliding", "off", "--session-gap", "off",
                            "--allowed-lateness", f"{LATENESS_MS // 1000}s", "--idle-timeout", "off",
                            "--shuffle-partitions", "2", "--trigger-seconds", "1"],
        "db_connector": ["--flush-interval-ms", "200"]})
    yield run
    run.stop()
    drop_database(stack_settings, wiring.database)


def test_pipeline_stays_exactly_once_under_kills_and_a_broker_restart(stack_settings: Settings, pipeline: Pipeline,
                                                                      tmp_path: Path) -> None:
    settings, wiring = stack_settings, pipeline.wiring
    kafka = Stack(settings, ["kafka"])
    if kafka.status()[0].state != "running":
        pytest.skip("the broker was not started by this stack launcher, so the test cannot restart it")
    events = write_events(tmp_path / "events.json")
    records = distinct_records(file_rows(events))
    want_pairs = join_oracle(settings, records)
    assert sum(want_pairs.values()) > 1000

    pipeline.start_stages()
    pipeline.wait_logged("mqtt_bridge", '"bridge running"', 60)
    simulator = pipeline.replay(events, "--rate", str(RATE))
    seed = int(os.environ.get("CHAOS_SEED", str(time.time_ns() % 1_000_000)))
    rng = random.Random(seed)
    faults = [stage for stage in STAGES for _ in range(KILLS_PER_STAGE)] + ["kafka-restart", "aggregate-stopped"]
    rng.shuffle(faults)
    replay_s = ROWS / RATE
    injected: list[str] = []
    started = time.monotonic()
    for index, fault in enumerate(faults):
        # spread the faults over the replay: each at a random point of its own slice
        slot = started + replay_s * (index + rng.random()) / len(faults)
        while time.monotonic() < slot:
            pipeline.supervise()
            time.sleep(0.2)
        at = f"{time.monotonic() - started:5.1f}s"
        if fault == "kafka-restart":
            kafka.down()
            time.sleep(3)
            restart_broker(kafka)
        elif fault == "aggregate-stopped":  # a long stop: it catches up with a skewed backlog
            pipeline.kill9("spark_aggregate")
            until = time.monotonic() + AGGREGATE_PAUSE_S
            while time.monotonic() < until:
                pipeline.supervise(skip={"spark_aggregate"})
                time.sleep(0.5)
            pipeline.restart("spark_aggregate")
        else:
            pipeline.kill9(fault)
            time.sleep(rng.uniform(0.5, 3))
            pipeline.restart(fault)
        injected.append(f"{at} {fault}")
    print(f"chaos seed {seed}; faults injected (time since replay start, fault): {injected}")
    print(f"restarts by the supervisor and the test: {pipeline.restarts}")

    # Drain: the simulator finishes, every stage catches up; supervise meanwhile.
    deadline = time.monotonic() + 900
    while simulator.alive() and time.monotonic() < deadline:
        pipeline.supervise()
        time.sleep(1)
    assert simulator.process.returncode == 0, pipeline.log("simulator").read_text()[-2000:]
    want_raw = expected_records(events)
    got_pairs: Counter = Counter()
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        pipeline.supervise()
        got_pairs = committed_pairs(settings, wiring.joined)
        expected_windows = window_expectation(settings, wiring.raw)
        got_windows, _ = committed_windows(settings, wiring.aggregates)
        judged = sum(aggregate_late(settings, wiring.late).values())
        if (sum(got_pairs.values()) >= sum(want_pairs.values()) and len(got_windows) >= len(expected_windows.windows)
                and judged >= sum(expected_windows.late_topic().values())):
            break
        time.sleep(5)

    # Kafka: raw holds every record of the file (re-sends byte-identical), joined and aggregates
    # exactly the oracle's output, each once.
    raw = read_topic(settings, wiring.raw)
    by_key: dict[bytes, set[bytes]] = {}
    for message in raw:
        by_key.setdefault(message.key(), set()).add(message.value())
    assert set(by_key) == set(want_raw) and all(len(values) == 1 for values in by_key.values())
    assert got_pairs == want_pairs, (len(got_pairs), len(want_pairs), list((want_pairs - got_pairs).items())[:3],
                                     list((got_pairs - want_pairs).items())[:3])
    assert max(got_pairs.values()) == 1
    got_windows, window_records = committed_windows(settings, wiring.aggregates)
    assert window_records == len(got_windows), "a window was committed twice"
    expected_windows = window_expectation(settings, wiring.raw)
    assert len(got_windows) > 300, "too few windows left to compare"
    want_windows = oracle_windows(expected_windows)
    assert windows_equal(got_windows, want_windows), (
        len(got_windows), len(want_windows), sorted(want_windows.keys() - got_windows.keys())[:3],
        sorted(got_windows.keys() - want_windows.keys())[:3])
    want_late = expected_windows.late_topic()
    assert aggregate_late(settings, wiring.late) == want_late
    behind = sum(n for key, n in want_late.items() if key[4] == "behind_watermark")

    # InfluxDB: exactly the points of the committed records, raw values equal to the file.
    expected = committed_identities(settings, wiring.connector_topics)
    deadline = time.monotonic() + 300
    got: dict[str, set] = {}
    while time.monotonic() < deadline:
        pipeline.supervise()
        got = influx_identities(settings, wiring.database)
        if got == expected:
            break
        time.sleep(3)
    for measurement, identities in expected.items():
        assert got[measurement] == identities, (measurement, len(got[measurement]), len(identities))
    print(f"exact: {len(want_raw)} raw records, {sum(want_pairs.values())} pairs, {len(got_windows)} windows "
          f"({behind} records behind their key's event time); faults {injected}")
