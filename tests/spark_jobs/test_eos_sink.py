"""The exactly-once sink on the real broker: visibility, replay skips, fencing, aborts, and a
driver killed with SIGKILL at every fault point and restarted from its checkpoint."""

from __future__ import annotations

import json
import os
import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from spark_jobs.eos_sink import FENCED, TRANSACTIONS, ExactlyOnceSink, SinkError, read_marker
from stacktools.stack.settings import Settings
from streamkit.kafka_clients import transactional_producer
from tests.drivers.eos_driver import DriverSettings
from tests.support.messages import value_of
from tests.support.spark import (
    key_values,
    log_tail,
    private_topic,
    produce_committed,
    read_to_end,
    spark_service,
    wait_pid_gone,
)
from tests.support.waits import settle

pytestmark = [pytest.mark.stack, pytest.mark.spark]
FAULT_ROUNDS = int(os.environ.get("EOS_FAULT_ROUNDS", "1"))
#: The pass-through driver's Kafka user (tests.drivers.eos_driver).
DRIVER_USER = DriverSettings().kafka_username


@pytest.fixture
def topics(stack_settings: Settings) -> tuple[str, str]:
    return private_topic(stack_settings, "joined"), private_topic(
        stack_settings, "markers", 1, compact=True
    )


def rows(topic: str, batch: int, n: int = 5) -> list[tuple]:
    return [
        (topic, f"b{batch}-{i}".encode(), f"v{batch}-{i}".encode(), i % 2, None) for i in range(n)
    ]


def expected(*batches: list[tuple]) -> Counter:
    return Counter((r[1], r[2]) for batch in batches for r in batch)


def new_sink(settings: Settings, marker_topic: str, query: str) -> ExactlyOnceSink:
    return ExactlyOnceSink(
        settings,
        query,
        marker_topic,
        transaction_timeout=timedelta(seconds=20),
        marker_timeout_s=20,
    )


def test_committed_output_visible_and_replayed_batch_skipped(
    stack_settings: Settings, topics: tuple[str, str]
) -> None:
    out, markers = topics
    query = f"q-{uuid.uuid4().hex[:8]}"
    sink = new_sink(stack_settings, markers, query)
    batch0, batch1 = rows(out, 0), rows(out, 1)
    assert sink.write_batch(0, batch0, query_id="id-1") == "committed"
    assert key_values(read_to_end(stack_settings, out)) == expected(batch0)
    sink.close()

    restarted = new_sink(stack_settings, markers, query)  # a restart: fences, re-reads the marker
    assert restarted.write_batch(0, batch0, query_id="id-1") == "skipped"
    assert restarted.write_batch(1, batch1, query_id="id-1") == "committed"
    assert restarted.write_batch(1, batch1, query_id="id-1") == "skipped"
    assert restarted.write_batch(2, [], query_id="id-1") == "empty"
    assert key_values(read_to_end(stack_settings, out)) == expected(batch0, batch1)
    marker = json.loads(value_of(read_to_end(stack_settings, markers)[-1]))
    assert (marker["batch_id"], marker["rows"], marker["query_id"]) == (1, 5, "id-1")
    # explicit partitions are kept
    assert {m.partition() for m in read_to_end(stack_settings, out)} == {0, 1}

    # a replaced checkpoint (new query id) restarts batch ids at 0: the old marker must not
    # swallow them
    fresh = new_sink(stack_settings, markers, query)
    assert fresh.write_batch(0, rows(out, 9, 2), query_id="id-2") == "committed"
    restarted.close()
    fresh.close()


def test_sink_prepared_ahead_keeps_the_marker_rules(
    stack_settings: Settings, topics: tuple[str, str]
) -> None:
    """prepare() fences and reads the marker before the query id is known; the first batch
    then adopts it: its own query's marker skips the replay, another query id's is ignored,
    and a zombie is fenced by the preparation alone."""
    out, markers = topics
    query = f"q-{uuid.uuid4().hex[:8]}"
    zombie = new_sink(stack_settings, markers, query)
    assert zombie.write_batch(0, rows(out, 0), query_id="id-1") == "committed"

    restarted = new_sink(stack_settings, markers, query)
    restarted.prepare()
    with pytest.raises(SinkError):  # fenced by the preparation, before any batch of the successor
        zombie.write_batch(1, rows(out, 1, 50), query_id="id-1")
    assert restarted.write_batch(0, rows(out, 0), query_id="id-1") == "skipped"
    assert restarted.write_batch(1, rows(out, 1), query_id="id-1") == "committed"
    restarted.close()

    replaced = new_sink(stack_settings, markers, query)  # a replaced checkpoint: batch ids restart
    replaced.prepare()
    assert replaced.write_batch(0, rows(out, 7, 2), query_id="id-2") == "committed"
    replaced.close()
    assert key_values(read_to_end(stack_settings, out)) == expected(
        rows(out, 0), rows(out, 1), rows(out, 7, 2)
    )


def test_sink_not_prepared_opens_at_the_first_batch(
    stack_settings: Settings, topics: tuple[str, str]
) -> None:
    """A preparation that fails (here: no marker topic yet) is only logged; the first batch
    opens the sink."""
    out, _ = topics
    markers = f"test.markers.{uuid.uuid4().hex[:10]}"  # does not exist while preparing
    sink = ExactlyOnceSink(
        stack_settings,
        f"q-{uuid.uuid4().hex[:8]}",
        markers,
        transaction_timeout=timedelta(seconds=20),
        marker_timeout_s=2,
    )
    sink.prepare()
    assert not sink._prepared
    with pytest.raises(SinkError):  # still no marker topic: the batch fails, as without preparation
        sink.write_batch(0, rows(out, 0), query_id="id-1")


def test_zombie_with_same_transactional_id_is_fenced(
    stack_settings: Settings, topics: tuple[str, str]
) -> None:
    out, markers = topics
    query = f"q-{uuid.uuid4().hex[:8]}"
    zombie = new_sink(stack_settings, markers, query)
    assert zombie.write_batch(0, rows(out, 0)) == "committed"
    successor = new_sink(stack_settings, markers, query)
    successor.open()  # init_transactions with the same transactional.id fences the zombie
    with pytest.raises(SinkError):
        zombie.write_batch(1, rows(out, 1, 50))
    assert FENCED.labels(query)._value.get() == 1  # what the ProducerFenced alert reads
    assert successor.write_batch(1, rows(out, 1)) == "committed"
    assert key_values(read_to_end(stack_settings, out)) == expected(rows(out, 0), rows(out, 1))
    successor.close()


def test_forced_abort_leaves_nothing_visible(
    stack_settings: Settings, topics: tuple[str, str]
) -> None:
    out, markers = topics
    query = f"q-{uuid.uuid4().hex[:8]}"
    sink = new_sink(stack_settings, markers, query)
    aborted_before = TRANSACTIONS.labels(query, "aborted")._value.get()

    def failing() -> Iterator[tuple]:
        yield from rows(out, 0, 20)
        producer = sink._producer  # open while the sink reads the batch's rows
        assert producer is not None
        producer.flush()  # the 20 records really reach the broker before the failure
        raise ValueError("encoding failed mid-batch")

    with pytest.raises(SinkError):
        sink.write_batch(0, failing())
    assert TRANSACTIONS.labels(query, "aborted")._value.get() == aborted_before + 1
    assert read_to_end(stack_settings, out) == []
    assert read_marker(stack_settings, markers, query) is None
    assert (
        len(read_to_end(stack_settings, out, "read_uncommitted")) == 20
    )  # they were written, then aborted
    # the retry of the same batch (what Spark does after a restart) commits it once
    assert sink.write_batch(0, rows(out, 0, 20)) == "committed"
    assert key_values(read_to_end(stack_settings, out)) == expected(rows(out, 0, 20))
    sink.close()


def test_marker_behind_another_writers_open_transaction_is_found(
    stack_settings: Settings, topics: tuple[str, str]
) -> None:
    """Reading markers only to the last stable offset would miss batch 1 here and redo it."""
    out, markers = topics
    query = f"q-{uuid.uuid4().hex[:8]}"
    sink = new_sink(stack_settings, markers, query)
    assert sink.write_batch(0, rows(out, 0)) == "committed"
    other = transactional_producer(stack_settings, f"other-{uuid.uuid4().hex[:8]}")
    other.begin_transaction()
    other.produce(markers, key=b"another-query", value=b'{"batch_id": 7}', partition=0)
    other.flush()
    assert (
        sink.write_batch(1, rows(out, 1)) == "committed"
    )  # our marker lands after the open transaction
    sink.close()
    threading.Timer(2.0, other.commit_transaction).start()
    started = time.monotonic()
    marker = read_marker(stack_settings, markers, query, timeout_s=120)  # a hang detector
    assert marker is not None and marker.batch_id == 1
    assert time.monotonic() - started >= 1.5, "returned before the other transaction ended"


# ----------------------------------------------------------------------------- Spark, kill -9
def run_driver(
    settings: Settings, work: Path, name: str, args: list[str], env: dict[str, str]
) -> tuple[int, Path]:
    log = work / f"{name}.log"
    pid_file = work / f"{name}.jvm.pid"
    service = spark_service(
        "tests.drivers.eos_driver", [*args, "--jvm-pid-file", str(pid_file)], log, env
    ).start()
    code = service.popen.wait(300)
    wait_pid_gone(pid_file)
    return code, log


def fault_plan(rounds: int, batches: int) -> list[tuple[str, int]]:
    """Round 1 hits every fault point once, at increasing batch ids; further rounds are random."""
    plan = [("before_produce", 1), ("after_produce", 3), ("after_commit", 5)]
    rng = random.Random(int(os.environ.get("EOS_FAULT_SEED", "7")))
    last = 5
    for _ in range(rounds - 1):
        last += rng.randint(1, 2)
        plan.append((rng.choice(["before_produce", "after_produce", "after_commit"]), last))
    assert last < batches - 1, "more fault rounds than batches: add input"
    return plan


@pytest.mark.chaos
def test_driver_killed_at_each_fault_point_gives_exact_output(
    stack_settings: Settings, tmp_path: Path
) -> None:
    per_batch = 40
    plan_length = 3 + 2 * (FAULT_ROUNDS - 1)
    batches = 20 + plan_length * 2  # room for the SIGTERM run after the kills
    raw = private_topic(stack_settings, "raw")
    out = private_topic(stack_settings, "joined")
    markers = private_topic(stack_settings, "markers", 1, compact=True)
    records = [
        (raw, f"k{i}".encode(), f"value-{i}".encode(), i % 2) for i in range(per_batch * batches)
    ]
    produce_committed(stack_settings, records)
    want = Counter((key, value) for _, key, value, _ in records)
    query = f"eos-{uuid.uuid4().hex[:8]}"
    args = [
        "--raw-topic",
        raw,
        "--output-topic",
        out,
        "--marker-topic",
        markers,
        "--query-name",
        query,
        "--checkpoint-dir",
        str(tmp_path / "checkpoint"),
        "--max-offsets-per-trigger",
        str(per_batch),
        "--available-now",
        "--trigger",
        "200ms",
    ]

    for round_no, (point, batch) in enumerate(fault_plan(FAULT_ROUNDS, batches)):
        code, log = run_driver(
            stack_settings,
            tmp_path,
            f"run{round_no}-{point}",
            args,
            {"EOS_FAULT_POINT": point, "EOS_FAULT_BATCH": str(batch)},
        )
        assert code == -9, (
            f"driver was not killed at {point}/{batch} (exit {code}): {log_tail(log)}"
        )
        # A transaction left open by the kill (after_produce) holds read_committed readers at its
        # first offset until a restart fences it: do what the restart does first (as the driver's
        # own Kafka user: its transactional id is under that user's name), then look.
        new_sink(stack_settings.acting_as("kafka", DRIVER_USER), markers, query).open()
        seen = key_values(read_to_end(stack_settings, out))
        assert max(seen.values()) == 1, f"duplicates after the kill at {point}/{batch}"
        assert not set(seen) - set(want), "output that is not in the input"
        marker = read_marker(stack_settings, markers, query)
        committed = marker.batch_id if marker else -1
        # the kill happened inside `batch`: it is committed exactly when the kill came after the
        # commit
        assert committed == (batch if point == "after_commit" else batch - 1), (
            point,
            batch,
            committed,
        )
        assert sum(seen.values()) == (committed + 1) * per_batch

    # SIGTERM while batches are flowing: exit 0, stop after the batch in the sink
    log = tmp_path / "sigterm.log"
    continuous = [a for a in args if a != "--available-now"]
    service = spark_service(
        "tests.drivers.eos_driver",
        [*continuous, "--jvm-pid-file", str(tmp_path / "sigterm.pid")],
        log,
    ).start()

    def two_more_batches() -> bool:
        if not service.alive():
            return True  # the assertion below says why
        marker = read_marker(stack_settings, markers, query)
        return marker is not None and marker.batch_id >= committed + 2

    settle(two_more_batches, 180, "two more batches committed", interval_s=0.3)
    assert service.terminate(120) == 0, log_tail(log)
    wait_pid_gone(tmp_path / "sigterm.pid")
    stopped = read_marker(stack_settings, markers, query)
    assert stopped is not None, "no marker after the stop"
    stopped_at = stopped.batch_id
    assert stopped_at >= committed + 2
    assert (
        sum(key_values(read_to_end(stack_settings, out)).values()) == (stopped_at + 1) * per_batch
    )

    code, log = run_driver(stack_settings, tmp_path, "final", args, {})
    assert code == 0, log_tail(log)
    assert key_values(read_to_end(stack_settings, out)) == want, (
        "read_committed output != input as a multiset"
    )
    after_commit_rounds = [b for p, b in fault_plan(FAULT_ROUNDS, batches) if p == "after_commit"]
    all_logs = "".join(p.read_text(errors="replace") for p in tmp_path.glob("*.log"))
    for batch in after_commit_rounds:  # the replay of a batch committed before the kill was skipped
        assert (
            f'"msg": "batch already committed: skipped", "query": "{query}", "batch_id": {batch},'
            in all_logs
        )
