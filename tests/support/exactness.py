"""What every end-to-end test checks at the end: the committed Kafka outputs and InfluxDB
equal, value for value, what the specification's oracles compute offline (tests/oracles: the
raw records from the file, the joined pairs, windows and late records from the raw topic in
arrival order): nothing lost, nothing twice, nothing different."""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from stacktools.harness.pipeline import Pipeline
from stacktools.harness.processes import ServiceProcess
from stacktools.stack import Stack
from stacktools.stack.process import group_alive
from stacktools.stack.settings import Settings
from stacktools.verify.check import verify
from stacktools.verify.report import render
from stacktools.verify.rules import Rules, parse_windows
from stacktools.verify.rules import parse_pairs as verify_pairs
from streamkit.deadline import wait_until
from streamkit.errors import StackError
from streamkit.kafka_io import read_to_end
from tests.oracles.join import parse_pairs
from tests.oracles.pipeline import PipelineSpec, expected_outputs
from tests.oracles.points import expected_points
from tests.oracles.rows import Measurement, file_rows, measurements
from tests.oracles.windows import Spec
from tests.support.judge import (
    SCHEMAS,
    arrival,
    committed_outputs,
    decoder,
    influx_points,
    judge_points,
    judge_topics,
)
from tests.support.messages import value_of
from tests.support.verdict import Verdict, assert_exact
from tests.support.waits import settle

WINDOW_MS, LATENESS_MS = 10_000, 60_000
NO_STATISTICS = ["--opstats-power", ""]
PAIRS = "actSpeed_*:vaTorque_*:mechanical_power"


def pipeline_args(trigger_s: int = 1) -> dict[str, list[str]]:
    """The stages' options in these tests. No idle timeout: the windows are then a function of
    the raw topic alone, whatever the faults did to the timing (the idle timeout has its own
    test in tests/spark_jobs)."""
    spark = ["--shuffle-partitions", "2", "--trigger", f"{trigger_s}s"]
    join = ["--pairs", PAIRS]
    windows = [
        "--tumbling",
        f"{WINDOW_MS}ms",
        "--sliding",
        "off",
        "--session-gap",
        "off",
        "--allowed-lateness",
        f"{LATENESS_MS // 1000}s",
        "--idle-timeout",
        "off",
    ]
    return {
        # the statistics off (they run beside the join in either shape): these runs judge the
        # join and the windows in every shape (the statistics' exactly-once has its test:
        # tests/spark_jobs/test_single_pass_opstats.py)
        "spark_join": [*join, *spark, "--idle-timeout", "off", *NO_STATISTICS],
        "spark_aggregate": [*windows, *spark],
        "spark_single_pass": [*join, *windows, *spark, *NO_STATISTICS],
        "db_connector": ["--flush-interval", "200ms"],
    }


#: What the oracle needs of the stages' options above.
PIPELINE = PipelineSpec(
    pairs=tuple(parse_pairs(PAIRS)),
    windows=(Spec("tumbling", WINDOW_MS, WINDOW_MS),),
    lateness_ms=LATENESS_MS,
)


def judge_pipeline(
    settings: Settings,
    topics: dict[str, str],
    database: str,
    spec: PipelineSpec,
    file_records: list[Measurement],
    skip_keys: frozenset[bytes] = frozenset(),
) -> list[Verdict]:
    """Every output topic and every InfluxDB measurement against the oracle, by value."""
    got = committed_outputs(settings, topics, skip_keys)
    want = expected_outputs(spec, file_records, arrival(got))
    return judge_topics(want, got) + judge_points(
        expected_points(want), influx_points(settings, database)
    )


def assert_pipeline_exact(
    settings: Settings,
    topics: dict[str, str],
    database: str,
    spec: PipelineSpec,
    file_records: list[Measurement],
    *,
    timeout_s: float,
    meanwhile: Callable[[], object] = lambda: None,
    skip_keys: frozenset[bytes] = frozenset(),
) -> str:
    """Waits (calling ``meanwhile``, e.g. a supervisor) until the outputs equal the oracle's,
    then asserts it: the AssertionError lists what is missing, extra, duplicated, different."""
    verdicts: list[Verdict] = []

    def exact() -> bool:
        meanwhile()
        verdicts[:] = judge_pipeline(settings, topics, database, spec, file_records, skip_keys)
        return all(v.exact for v in verdicts)

    settle(exact, timeout_s, "every output equal to the oracle", interval_s=10)
    return assert_exact(*verdicts)


@dataclass(frozen=True)
class Killed:
    """A server killed with SIGKILL: its name and the pid it had (a restart must give another)."""

    name: str
    pid: int


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
            time.sleep(5)  # the port's release has no event to wait on


def kill_group(stack: Stack, rng: random.Random, spare: tuple[str, ...] = ()) -> Killed:
    """SIGKILL one running server of ``stack`` but ``spare`` at random, with its whole process
    group (a Spark worker's executors and their Python workers die with it, as on a lost
    machine), and wait until the group is gone: a kill that did not happen fails here."""
    running = [
        status
        for status in stack.status()
        if status.state == "running" and status.pid and status.name not in spare
    ]
    if not running:
        raise AssertionError(f"nothing of {stack.names} runs to be killed")
    victim = rng.choice(running)
    pid = victim.pid
    assert pid is not None  # only servers with a pid were chosen
    os.killpg(pid, signal.SIGKILL)
    wait_until(lambda: not group_alive(pid), 30, f"{victim.name} (pid {pid}) gone after SIGKILL")
    return Killed(victim.name, pid)


def assert_back(stack: Stack, killed: Killed) -> None:
    """The killed server runs again, as a new process."""
    (status,) = [s for s in stack.status() if s.name == killed.name]
    assert status.state == "running" and status.pid not in (None, killed.pid), (killed, status)


def assert_exactly_once(
    settings: Settings,
    pipeline: Pipeline,
    simulator: ServiceProcess,
    events: Path,
    skip_keys: frozenset[bytes] = frozenset(),
) -> str:
    """Drain (the simulator finishes, supervised meanwhile), then every output equal to the
    oracle of the file, by value; returns a one-line summary."""

    def replayed() -> bool:
        if not simulator.alive():
            return True
        pipeline.supervise()
        return False

    # a simulator still running fails the assertion below
    settle(replayed, 900, "the simulator's replay")
    assert simulator.popen.returncode == 0, pipeline.log("simulator").read_text()[-2000:]
    records = measurements(file_rows(events))
    wiring = pipeline.wiring
    topics = {
        kind: wiring.connector_topics[kind] for kind in ("raw", "joined", "aggregates", "late")
    }
    return assert_pipeline_exact(
        settings,
        topics,
        wiring.database,
        PIPELINE,
        records,
        timeout_s=900,
        meanwhile=pipeline.supervise,
        skip_keys=skip_keys,
    )


def overtaken_records(settings: Settings, raw_topic: str) -> int:
    """First copies of raw records that arrived behind a newer record of their own (thing,
    quantity) stream: a Mosquitto crash can deliver a Thing's messages out of the order they
    were published (docs/exactly-once.md). Re-sent copies do not count."""
    decode, overtaken = decoder(SCHEMAS["raw"]), 0
    seen: set[tuple[tuple[str, str], int]] = set()
    newest: dict[tuple[str, str], int] = {}
    for message in read_to_end(settings, raw_topic):
        r = decode(value_of(message))
        stream, t = (r["thing"], r["quantity"]), r["event_time_ms"]
        if (stream, t) in seen:
            continue
        seen.add((stream, t))
        overtaken += t < newest.get(stream, t)
        newest[stream] = max(t, newest.get(stream, t))
    return overtaken


def assert_verify_exact(settings: Settings, database: str, events: Path, raw_topic: str) -> str:
    """The user's check agrees: ``python -m stacktools.verify``'s verification of the file
    against the run's database is exact (identical re-sends the faults caused set aside, as
    that command does). Its verdict only adds to the oracles', never replaces it. It judges the
    file in its order, so it has nothing to say of a run whose raw topic holds the file's
    records in another order (the oracles, which read the topic's order, judged that run)."""
    overtaken = overtaken_records(settings, raw_topic)
    if overtaken:
        return f"verify not run: {overtaken} raw records arrived behind newer ones of their stream"
    rules = Rules(
        pairs=verify_pairs(PAIRS),
        max_gap_ms=None,
        windows=parse_windows(f"{WINDOW_MS}ms", "off", "off"),
        lateness_ms=LATENESS_MS,
    )
    outcome = verify(settings, events, database, rules)
    assert outcome.exact, render(outcome)
    (late,) = [v for v in outcome.verdicts if v.measurement == "late"]
    return f"verify exact ({late.resent} re-sent copies set aside)"
