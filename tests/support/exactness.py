"""What every end-to-end fault test checks at the end: the committed Kafka outputs and InfluxDB
equal the oracles computed offline (the join's library oracle over the file's records, the
window oracle over the raw topic in arrival order): nothing lost, nothing twice."""
from __future__ import annotations

import math
import os
import random
import signal
import time
from collections import Counter
from pathlib import Path

from spark_jobs.config import JoinSettings
from streamkit.wire import AvroCodec
from streamkit.config import Settings
from streamkit.kafka_io import read_to_end
from tests.support.waits import settle
from tests.support.harness import expected_records
from stacktools.pipeline import Pipeline
from stacktools.processes import ServiceProcess
from stacktools.stack import Stack
from stacktools.stack.process import StackError
from tests.support.committed import committed_pairs
from tests.support.oracles.pipeline import join_pairs
from tests.support.influx_checks import POISON_KEY, committed_identities, influx_identities
from tests.support.oracles.windows import Expected, Spec, window_oracle

WINDOW_MS, LATENESS_MS = 10_000, 60_000
PAIRS = "actSpeed_C11:vaTorque_C11:mechanical_power"


def pipeline_args(trigger_s: int = 1) -> dict[str, list[str]]:
    """The stages' options in these tests. No idle timeout: the windows are then a function of
    the raw topic alone, whatever the faults did to the timing (the idle timeout has its own
    test in tests/spark_jobs)."""
    spark = ["--shuffle-partitions", "2", "--trigger-seconds", str(trigger_s)]
    join = ["--pairs", PAIRS]
    windows = ["--tumbling", f"{WINDOW_MS}ms", "--sliding", "off", "--session-gap", "off",
               "--allowed-lateness", f"{LATENESS_MS // 1000}s", "--idle-timeout", "off"]
    return {"spark_join": [*join, *spark], "spark_aggregate": [*windows, *spark],
            "spark_single_pass": [*join, *windows, *spark], "db_connector": ["--flush-interval-ms", "200"]}


def join_oracle(settings: Settings, records: list[tuple[str, str, int, float]]) -> Counter:
    """The join test's oracle (the library's per-record path) on these records."""
    return join_pairs(JoinSettings.from_sources(cli={"run_dir": settings.run_dir, "pairs": PAIRS}), records)[0]


def window_expectation(settings: Settings, raw_topic: str) -> Expected:
    """The window oracle over what the raw topic holds, each key in arrival order."""
    codec = AvroCodec("measurement")
    arrival = []
    for message in read_to_end(settings, raw_topic):
        r = codec.decode(message.value())
        arrival.append((r["thing"], r["quantity"], r["event_time_ms"], r["value"], r["row_id"]))
    return window_oracle(arrival, [Spec("tumbling", WINDOW_MS, WINDOW_MS)], LATENESS_MS)


def aggregate_late(settings: Settings, late_topic: str) -> Counter:
    codec = AvroCodec("late")
    late: Counter = Counter()
    for message in read_to_end(settings, late_topic):
        if message.key() == POISON_KEY:
            continue
        r = codec.decode(message.value())
        if r["stage"] == "aggregate":
            late[(r["thing"], r["quantity"], r["event_time_ms"], r["row_id"], r["reason"])] += 1
    return late



def committed_windows(settings: Settings, topic: str) -> tuple[dict[str, tuple], int]:
    codec = AvroCodec("aggregate")
    windows, messages = {}, read_to_end(settings, topic)
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


def kill_group(stack: Stack, rng: random.Random, spare: tuple[str, ...] = ()) -> str:
    """SIGKILL one running server of ``stack`` but ``spare`` at random, with its whole process
    group (a Spark worker's executors and their Python workers die with it, as on a lost
    machine); its name."""
    running = [status for status in stack.status()
               if status.state == "running" and status.pid and status.name not in spare]
    if not running:
        raise AssertionError(f"nothing of {stack.names} runs to be killed")
    victim = rng.choice(running)
    os.killpg(victim.pid, signal.SIGKILL)
    return victim.name


def assert_exactly_once(settings: Settings, pipeline: Pipeline, simulator: ServiceProcess, events: Path,
                        want_pairs: Counter) -> str:
    """Drain (the simulator finishes, every stage catches up, supervised meanwhile), then
    compare every output with its oracle; returns a one-line summary."""
    wiring = pipeline.wiring
    # Drain: the simulator finishes, every stage catches up; supervise meanwhile.
    def replayed() -> bool:
        if not simulator.alive():
            return True
        pipeline.supervise()
        return False

    settle(replayed, 900, "the simulator's replay")  # a simulator still running fails the assertion below
    assert simulator.process.returncode == 0, pipeline.log("simulator").read_text()[-2000:]
    want_raw = expected_records(events)
    got_pairs: Counter = Counter()

    def caught_up() -> bool:
        nonlocal got_pairs
        pipeline.supervise()
        got_pairs = committed_pairs(settings, wiring.joined)
        expected_windows = window_expectation(settings, wiring.raw)
        got_windows, _ = committed_windows(settings, wiring.aggregates)
        judged = sum(aggregate_late(settings, wiring.late).values())
        return (sum(got_pairs.values()) >= sum(want_pairs.values()) and len(got_windows) >= len(expected_windows.windows)
                and judged >= sum(expected_windows.late_topic().values()))

    settle(caught_up, 600, "every stage caught up", interval_s=5)

    # Kafka: raw holds every record of the file (re-sends byte-identical), joined and aggregates
    # exactly the oracle's output, each once.
    raw = read_to_end(settings, wiring.raw)
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
    got: dict[str, set] = {}

    def landed() -> bool:
        nonlocal got
        pipeline.supervise()
        got = influx_identities(settings, wiring.database)
        return got == expected

    settle(landed, 300, "the committed points in InfluxDB", interval_s=3)
    for measurement, identities in expected.items():
        assert got[measurement] == identities, (measurement, len(got[measurement]), len(identities))
    return (f"exact: {len(want_raw)} raw records, {sum(want_pairs.values())} pairs, {len(got_windows)} windows "
          f"({behind} records behind their key's event time)")
