"""The streaming join job on the real stack: its committed output equals the library's oracle,
exactly once, also when the driver is killed with SIGKILL at random points and restarted."""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from mqtt_bridge.records import RowSplitter
from spark_jobs.config import JoinSettings
from stacktools.stack.settings import Settings
from streamkit.wire import AvroCodec
from tests.oracles.pipeline import join_pairs
from tests.support.committed import committed_pairs
from tests.support.harness import bridge_rows
from tests.support.messages import headers_of, key_of, value_of
from tests.support.require import cannot_run
from tests.support.spark import (
    REPO,
    log_tail,
    private_topic,
    produce_committed,
    read_to_end,
    spark_service,
    wait_driver_gone,
)
from tests.support.waits import settle

pytestmark = [pytest.mark.stack, pytest.mark.spark]
SAMPLE = REPO / "tests" / "data" / "test_events.json"
KILL_ROUNDS = int(os.environ.get("JOIN_KILL_ROUNDS", "4"))
PAIRS = "actSpeed_*:vaTorque_*:mechanical_power,vaCurr_C11:vaLoad_C11:product"


def feed_raw(settings: Settings, topic: str, partitions: int) -> list[tuple[str, str, int, float]]:
    """The sample in event-time order, as the bridge writes it; returns (thing, quantity, t, v)
    in the order each thing's partition holds them."""
    splitter = RowSplitter(partitions)
    codec = AvroCodec("measurement")
    records, fed = [], []
    for row in bridge_rows(SAMPLE):
        for record in splitter.split(row):
            records.append((topic, record.key, record.value, record.partition))
            decoded = codec.decode(record.value)
            fed.append(
                (decoded["thing"], decoded["quantity"], decoded["event_time_ms"], decoded["value"])
            )
    produce_committed(settings, records)
    return fed


@pytest.fixture
def join_lane(stack_settings: Settings, tmp_path: Path) -> dict:
    raw = private_topic(stack_settings, "raw", partitions=2)
    lane: dict[str, Any] = {
        "raw": raw,
        "joined": private_topic(stack_settings, "joined"),
        "late": private_topic(stack_settings, "late"),
        "markers": private_topic(stack_settings, "markers", partitions=1, compact=True),
    }
    lane["fed"] = feed_raw(stack_settings, raw, 2)
    lane["args"] = [
        "--raw-topic",
        raw,
        "--joined-topic",
        lane["joined"],
        "--late-topic",
        lane["late"],
        "--marker-topic",
        lane["markers"],
        "--checkpoint-dir",
        str(tmp_path / "checkpoint"),
        "--query-name",
        f"join-{raw}",
        "--pairs",
        PAIRS,
        "--shuffle-partitions",
        "2",
        "--idle-timeout",  # pairs made certain by the data alone, as the oracle makes them
        "off",
        "--opstats-power",  # the join alone (the statistics beside it: test_single_pass_opstats)
        "",
    ]
    lane["settings"] = JoinSettings.from_sources(
        cli={"run_dir": stack_settings.run_dir, "pairs": PAIRS}
    )
    return lane


def test_join_job_output_equals_the_oracle_exactly_once(
    stack_settings: Settings, join_lane: dict, tmp_path: Path
) -> None:
    log = tmp_path / "join.log"
    job = spark_service(
        "spark_jobs.join",
        [*join_lane["args"], "--available-now", "--max-offsets-per-trigger", "6000"],
        log,
    ).start()
    assert job.popen.wait(600) == 0, log_tail(log)
    expected, expected_late = join_pairs(join_lane["settings"], join_lane["fed"])
    got = committed_pairs(stack_settings, join_lane["joined"])
    assert sum(expected.values()) > 1000 and max(expected.values()) == 1
    assert got == expected, (
        len(got),
        len(expected),
        list((got - expected).items())[:3],
        list((expected - got).items())[:3],
    )
    late = [
        AvroCodec("late").decode(value_of(m))
        for m in read_to_end(stack_settings, join_lane["late"])
    ]
    assert len(late) == expected_late
    # In event-time order only exact repeats of a (thing, quantity, time) can be late here.
    assert {(r["reason"], r["stage"]) for r in late} <= {("late", "join"), ("duplicate", "join")}


POISON = [b"\xff\xfe not avro", b"", b"\x02"]  # random bytes, empty, a string cut short


def test_undecodable_raw_records_are_dead_lettered_once_and_the_job_goes_on(
    stack_settings: Settings, join_lane: dict, tmp_path: Path
) -> None:
    """Records the job cannot decode (written by the admin: only the bridge may write the raw
    topic) used to fail the query at every restart. Now each is dead-lettered once, in its
    batch's transaction; the pairs are the oracle's, and a restart neither repeats them nor
    stops at a new one."""
    raw, dlq = join_lane["raw"], private_topic(stack_settings, "dlq", 1)
    produce_committed(
        stack_settings, [(raw, b"poison-%d" % i, value, i % 2) for i, value in enumerate(POISON)]
    )
    log = tmp_path / "join.log"
    args = [
        *join_lane["args"],
        "--dlq-topic",
        dlq,
        "--available-now",
        "--max-offsets-per-trigger",
        "6000",
    ]
    assert spark_service("spark_jobs.join", args, log).start().popen.wait(600) == 0, log_tail(log)
    expected, _ = join_pairs(join_lane["settings"], join_lane["fed"])
    assert committed_pairs(stack_settings, join_lane["joined"]) == expected

    def dead_letters() -> list[tuple[bytes, bytes, dict[str, bytes]]]:
        return [(key_of(m), value_of(m), headers_of(m)) for m in read_to_end(stack_settings, dlq)]

    letters = dead_letters()
    assert sorted((key, value) for key, value, _ in letters) == sorted(
        (b"poison-%d" % i, value) for i, value in enumerate(POISON)
    )
    for key, value, headers in letters:
        assert (headers["reason"], headers["stage"], headers["source"]) == (
            b"undecodable",
            b"join",
            raw.encode(),
        )
        assert int(headers["source_partition"]) == int(key[-1:]) % 2 and int(
            headers["payload_bytes"]
        ) == len(value)
    produce_committed(stack_settings, [(raw, b"poison-late", b"\xff", 0)])
    assert spark_service("spark_jobs.join", args, log).start().popen.wait(600) == 0, log_tail(log)
    assert sorted(key for key, _, _ in dead_letters()) == sorted(
        [b"poison-late", *(k for k, _, _ in letters)]
    )
    assert committed_pairs(stack_settings, join_lane["joined"]) == expected


@pytest.mark.chaos
def test_join_job_killed_at_random_points_stays_exactly_once(
    stack_settings: Settings, join_lane: dict, tmp_path: Path
) -> None:
    """SIGKILL the driver at random moments (inside a batch, between produce and commit, after
    the Kafka commit before Spark's commit log: wherever the moment falls) and once after the
    produce (the transaction left open), restarting from the checkpoint each time. Every named
    point of the driver's sink, with the state in the driver as here, is killed in
    test_single_pass_job.py (local-driver-state-driver) and, with the checks after each kill, in
    test_eos_sink.py."""
    seed = int(os.environ.get("JOIN_KILL_SEED", str(time.time_ns())))
    rng = random.Random(seed)
    fault_points = ["after_produce"]
    log = tmp_path / "join.log"
    args = [*join_lane["args"], "--available-now", "--max-offsets-per-trigger", "1500"]
    injected = []
    for round_no in range(KILL_ROUNDS):
        if round_no < len(fault_points):
            env = {"EOS_FAULT_POINT": fault_points[round_no], "EOS_FAULT_BATCH": str(round_no + 1)}
            job = spark_service(
                "tests.drivers.faulty_job", ["spark_jobs.join", *args], log, env
            ).start()
            code = job.popen.wait(600)
            injected.append(f"{fault_points[round_no]}@batch{round_no + 1}:exit{code}")
        else:
            job = spark_service("spark_jobs.join", args, log).start()
            delay = rng.uniform(8, 30)  # the scenario: a kill at a random moment of the run
            try:
                code = job.popen.wait(delay)
                injected.append(f"finished-before-kill({delay:.1f}s)")
            except Exception:  # noqa: BLE001 - still running: kill it
                job.kill9()
                injected.append(f"kill9@{delay:.1f}s")
        wait_driver_gone(job)
    print(f"seed {seed}; faults injected: {injected}")
    final = spark_service("spark_jobs.join", args, log).start()
    assert final.popen.wait(900) == 0, log_tail(log)
    expected, _ = join_pairs(join_lane["settings"], join_lane["fed"])
    got = committed_pairs(stack_settings, join_lane["joined"])
    assert got == expected, (
        f"seed {seed}",
        injected,
        sum(got.values()),
        sum(expected.values()),
        list((got - expected).items())[:3],
        list((expected - got).items())[:3],
    )


@pytest.mark.chaos
def test_join_job_recovers_after_a_broker_restart(
    stack_settings: Settings, join_lane: dict, tmp_path: Path
) -> None:
    """Restart the Kafka broker under a running join job. The job either rides it out or fails
    and is restarted from its checkpoint (as a supervisor would): the output stays exact."""
    from stacktools.stack import Stack

    kafka = Stack(stack_settings, ["kafka"])
    if kafka.status()[0].state != "running":
        cannot_run(
            "the broker was not started by this stack launcher, so the test cannot restart it"
        )
    log = tmp_path / "join.log"
    args = [*join_lane["args"], "--max-offsets-per-trigger", "3000", "--trigger", "500ms"]
    job = spark_service("spark_jobs.join", args, log).start()
    expected, _ = join_pairs(join_lane["settings"], join_lane["fed"])

    def first_batch() -> bool:
        if '"msg": "batch committed"' in log.read_text(errors="replace"):
            return True
        assert job.alive(), log_tail(log)
        return False

    settle(first_batch, 300, "the join's first batch")
    kafka.down()
    time.sleep(5)  # the scenario: the broker stays away for a while under the running job
    kafka.up()
    restarts = 0
    got: Counter = Counter()

    def recovered() -> bool:
        nonlocal restarts, job, got
        if not job.alive():  # failed on the outage: restart it from its checkpoint
            restarts += 1
            job = spark_service("spark_jobs.join", args, log).start()
        got = committed_pairs(stack_settings, join_lane["joined"])
        return sum(got.values()) >= sum(expected.values())

    settle(recovered, 420, "every pair committed after the broker restart", interval_s=3)
    print(f"join job restarts after the broker restart: {restarts}")
    assert job.terminate(120) == 0, log_tail(log)
    assert committed_pairs(stack_settings, join_lane["joined"]) == expected
