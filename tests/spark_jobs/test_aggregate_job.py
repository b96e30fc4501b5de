"""python -m spark_jobs.aggregate on the real stack against the brute-force window oracle.

The oracle (tests/oracles/windows.py) reads each key's records in the order they were
produced, which is their Kafka arrival order: every window and every set-aside record must equal it,
whatever trigger size cut the input into batches.
"""

from __future__ import annotations

import io
import json
import re
import time
import urllib.request
import uuid
from collections import Counter
from pathlib import Path

import pytest

from stacktools.harness.wiring import Wiring
from stacktools.stack.settings import Settings
from stacktools.stack.topics import TopicSpec, provision
from streamkit.deadline import TimedOut, wait_until
from streamkit.wire import AvroCodec, thing_partition
from tests.oracles.pipeline import distinct_records
from tests.oracles.rows import event_time_order, file_rows
from tests.oracles.windows import Record, Spec, window_oracle
from tests.support.aggregates import (
    assert_windows_equal,
    decoded,
    produce_measurements,
    window_args,
)
from tests.support.messages import header_of, key_of, value_of
from tests.support.spark import (
    REPO,
    log_tail,
    private_topic,
    produce_committed,
    read_to_end,
    spark_service,
)
from tests.support.waits import settle

pytestmark = [pytest.mark.stack, pytest.mark.spark]
SAMPLE = REPO / "tests" / "data" / "test_events.json"
LATENESS_MS = 10_000
TUMBLING = Spec("tumbling", 10_000, 10_000)
SLIDING = Spec("sliding", 60_000, 20_000)
SESSION = Spec("session", 5_000, 5_000)
T0 = 1_554_000_000_000  # 2019-03-31, as the sample


def things_on_partitions(partitions: int) -> tuple[str, str, str, str]:
    """Two things on partition 0 and two on partition 1 (as the bridge places them)."""
    found: dict[int, list[str]] = {0: [], 1: []}
    n = 0
    while min(len(v) for v in found.values()) < 2:
        name = f"Machine{n}"
        found.setdefault(thing_partition(name, partitions), []).append(name)
        n += 1
    return found[0][0], found[1][0], found[0][1], found[1][1]


def aside_of(got: list[tuple[bytes, dict]]) -> Counter:
    return Counter(
        (r["thing"], r["quantity"], r["event_time_ms"], r["row_id"], r["reason"]) for _, r in got
    )


class Outputs:
    """Private output topics and a checkpoint for one run of the job."""

    def __init__(self, settings: Settings, tmp: Path, name: str) -> None:
        self.aggregates, self.late = (
            private_topic(settings, "aggregates", 2),
            private_topic(settings, "late", 2),
        )
        self.markers = private_topic(settings, "markers", 1, compact=True)
        self.query = f"{name}-{uuid.uuid4().hex[:8]}"
        self.checkpoint, self.log = tmp / f"{name}-checkpoint", tmp / f"{name}.log"

    def args(self) -> list[str]:
        return [
            "--aggregates-topic",
            self.aggregates,
            "--late-topic",
            self.late,
            "--marker-topic",
            self.markers,
            "--query-name",
            self.query,
            "--checkpoint-dir",
            str(self.checkpoint),
        ]


def skewed_and_bad_clock_input(partitions: int) -> list[Record]:
    """The issue's measured cases in one input, each stream in event-time order: A at 1 Hz over
    1,000 s with B (other partition) at 1 Hz for 500 s then 10 Hz; C and D at 1 Hz with one
    reading of C ten years ahead. Then one record per key at 1,010 s, which closes every window
    of the first 1,000 s."""
    a, b, c, d = things_on_partitions(partitions)
    records: list[Record] = []
    for second in range(1000):
        t = T0 + second * 1000
        records += [
            (a, "speed", t, float(second % 7), f"a{second}"),
            (c, "speed", t, float(second % 5), f"c{second}"),
            (d, "speed", t, float(second % 3), f"d{second}"),
        ]
        records += [
            (b, "speed", t + k * 100, float(k), f"b{second}.{k}")
            for k in range(1 if second < 500 else 10)
        ]
        if second == 400:
            records.append((c, "speed", t + 10 * 365 * 86_400_000, 99.0, "c-bad-clock"))
    records += [(thing, "speed", T0 + 1_010_000, 0.0, f"{thing}-closer") for thing in (a, b, c, d)]
    return records


def test_any_trigger_size_gives_the_oracle_output(stack_settings: Settings, tmp_path: Path) -> None:
    """Skewed partitions, a bad clock and two records that do not decode, read in batches of 400
    records and in one of 100,000 by a backfill (--available-now): every window of the first
    1,000 s, no late record but the bad clock, the same records in both runs, and each run
    dead-letters the two undecodable records once (any other cuts: the windows' property tests,
    tests/windowing)."""
    partitions = stack_settings.topic_partitions
    records = skewed_and_bad_clock_input(partitions)
    lane = Wiring.private(stack_settings, bridge_only=True)
    produce_measurements(stack_settings, lane.raw, records, partitions)
    poison = [(lane.raw, b"poison-a", b"\xff\xfe not avro", 0), (lane.raw, b"poison-b", b"", 1)]
    produce_committed(stack_settings, poison)
    specs = [TUMBLING]
    expected = window_oracle(
        records, specs, LATENESS_MS, now_ms=int(time.time() * 1000), max_future_ms=3_600_000
    )
    assert len(expected.windows) == 400 and all(
        w["window_end_ms"] <= T0 + 1_000_000 for w in expected.windows.values()
    )
    runs: list[tuple[Counter, Counter]] = []
    for trigger in (400, 100_000):
        out = Outputs(stack_settings, tmp_path, f"agg{trigger}")
        service = spark_service(
            "spark_jobs.aggregate",
            [
                "--raw-topic",
                lane.raw,
                "--dlq-topic",
                lane.dlq,
                *out.args(),
                *window_args(specs, LATENESS_MS),
                "--available-now",
                "--max-offsets-per-trigger",
                str(trigger),
            ],
            out.log,
        ).start()
        assert service.popen.wait(600) == 0, log_tail(out.log)
        letters = [
            (key_of(m), value_of(m), header_of(m, "reason"))
            for m in read_to_end(stack_settings, lane.dlq)
        ]
        assert Counter(letters) == {
            (key, value, b"undecodable"): len(runs) + 1 for _, key, value, _ in poison
        }
        aggregates, late = (
            decoded(stack_settings, out.aggregates, "aggregate"),
            decoded(stack_settings, out.late, "late"),
        )
        assert_windows_equal(aggregates, expected)
        assert [(r["row_id"], r["reason"]) for _, r in late] == [
            ("c-bad-clock", "future_timestamp")
        ], trigger
        runs.append((Counter((k, tuple(sorted(v.items()))) for k, v in aggregates), aside_of(late)))
    assert runs[0] == runs[1]  # bit for bit, not only close


#: The live windows' jobs: the aggregate job, and the single pass with its state in the driver
#: (its timers fire in the heartbeat's batches; a join of quantities the input never has).
LIVE_JOBS = {
    "aggregate": ("spark_jobs.aggregate", [], {}),
    "single-pass-driver-state": (
        "spark_jobs.single_pass",
        # the windows alone (the statistics have tests/spark_jobs/test_single_pass_opstats.py)
        ["--pairs", "absentA:absentB:product", "--opstats-power", ""],
        {"SPARK_STATE": "driver"},
    ),
}


#: The metric counting the keys a live job holds state for (Spark's store, the driver's table).
STATE_METRIC = {"aggregate": "spark_state_rows", "single-pass-driver-state": "driver_state_keys"}


@pytest.mark.parametrize("job", sorted(LIVE_JOBS))
def test_live_job_with_sessions_duplicates_late_records_and_the_idle_timeout(
    stack_settings: Settings, tmp_path: Path, job: str
) -> None:
    """The sample with re-sent rows and late probes, tumbling, sliding and session windows, then
    both sides of the idle timeout: a key that speaks again within it keeps its windows open
    (its second record counts in the same windows as its first); a key silent longer has them
    emitted, and a record in them afterwards is ``window_closed``. Then every key, silent for
    the state retention, is dropped from the state (the outputs unchanged: the idle flushes had
    emitted everything they owed)."""
    partitions = stack_settings.topic_partitions
    sample = [
        (thing, quantity, t, value, f"row{i}")
        for i, (thing, quantity, t, value) in enumerate(
            distinct_records(event_time_order(file_rows(SAMPLE)))
        )
    ]
    thing = sample[-1][0]
    newest = max(r[2] for r in sample if r[0] == thing)
    probes = [
        (thing, "probe", newest, 1.0, "p1"),
        (thing, "probe", newest - 20_000, 2.0, "p2"),  # late
        (thing, "probe", newest - 10_000, 3.0, "p3"),  # exactly at the allowed lateness: on time
        (thing, "probe", newest, 4.0, "p4"),
    ]  # a changed copy of p1: the last copy wins, p1 superseded
    phase1 = (
        sample + sample[-40:] + probes
    )  # the last rows re-sent (as after a bridge restart): duplicates
    specs = [TUMBLING, SLIDING, SESSION]
    idle_s = 20
    # past the last phase's record: Silent must still hold its closed windows then
    retention_s = 4 * idle_s
    lane = Wiring.private(stack_settings, bridge_only=True)
    out = Outputs(stack_settings, tmp_path, "agglive")
    produce_measurements(stack_settings, lane.raw, phase1, partitions)
    module, job_args, env = LIVE_JOBS[job]
    if module == "spark_jobs.single_pass":
        job_args = [*job_args, "--joined-topic", private_topic(stack_settings, "joined", 2)]
    service = spark_service(
        module,
        [
            "--raw-topic",
            lane.raw,
            *out.args(),
            *window_args(specs, LATENESS_MS),
            "--idle-timeout",
            f"{idle_s}s",
            "--state-retention",
            f"{retention_s}s",
            "--trigger",
            "500ms",
            *job_args,
        ],
        out.log,
        env,
    ).start()
    metrics_port = int(service.args[service.args.index("--metrics-port") + 1])
    metrics = ""

    def query_metric(name: str) -> float | None:
        """This query's ``name`` in the last scrape, None while it has none."""
        match = re.search(rf'^{name}{{.*query="{out.query}".*}} (\S+)$', metrics, re.M)
        return None if match is None else float(match.group(1))

    silent, talking = ("Silent", "q"), ("Talking", "q")
    # every key of the sample goes silent after its last record: idle flush for all of them
    sample_flushes = [(*key, n) for key, n in Counter(r[:2] for r in phase1).items()]
    try:
        in_phase1 = window_oracle(phase1, specs, LATENESS_MS, flush_after=sample_flushes)
        wait_for(stack_settings, out.aggregates, len(in_phase1.windows), service, out.log)
        # both sides of the idle timeout: one record each now, Talking again before the timeout
        phase2 = [(*silent, T0, 1.0, "s1"), (*talking, T0, 1.0, "t1")]
        produce_measurements(stack_settings, lane.raw, phase2, partitions)
        time.sleep(idle_s / 2)  # the scenario: Talking speaks again half an idle timeout later
        phase3 = [(*talking, T0 + 1000, 2.0, "t2")]
        produce_measurements(stack_settings, lane.raw, phase3, partitions)
        # each flushed: 1 tumbling, 3 sliding (60 s every 20 s), 1 session window
        wait_for(
            stack_settings,
            out.aggregates,
            10,
            service,
            out.log,
            idle_s * 4,
            match=lambda r: r["thing"] in ("Silent", "Talking"),
        )
        phase4 = [(*silent, T0 + 2000, 3.0, "s2")]  # in a window the idle flush closed
        produce_measurements(stack_settings, lane.raw, phase4, partitions)
        wait_for(stack_settings, out.late, 1, service, out.log, match=lambda r: r["row_id"] == "s2")
        everything = len(phase1 + phase2 + phase3 + phase4)

        def scrape() -> None:
            nonlocal metrics
            assert service.alive(), f"job died: {log_tail(out.log)}"
            metrics = (
                urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10)
                .read()
                .decode()
            )

        def read_everything() -> bool:
            """The job's own progress (reported after a batch completed, its output committed)
            counts every record produced: whatever it makes of them is in the topics now."""
            scrape()
            return (query_metric("spark_input_rows_total") or 0) >= everything

        # a hang detector: the batch holding s2 already committed, only its progress report is due
        settle(read_everything, 120, "the job's progress past the last record", interval_s=0.5)
        held = query_metric(STATE_METRIC[job])
        assert held, f"{STATE_METRIC[job]}: {held} keys held before the retention"

        def every_key_dropped() -> bool:
            scrape()
            return query_metric(STATE_METRIC[job]) == 0

        # the last record's key is due at the retention after it, its timer fires within a
        # trigger, and the metric is set when that batch's progress is reported
        settle(every_key_dropped, retention_s + idle_s + 60, "every key dropped", interval_s=1)
    finally:
        code = service.terminate(120)
    assert code == 0, f"SIGTERM exit {code}: {log_tail(out.log)}"

    # Silent went idle after its 1st record, Talking after its 2nd (and only then)
    expected = window_oracle(
        phase1 + phase2 + phase3 + phase4,
        specs,
        LATENESS_MS,
        flush_after=[*sample_flushes, (*silent, 1), (*talking, 2)],
    )
    aggregates = decoded(stack_settings, out.aggregates, "aggregate")
    assert_windows_equal(aggregates, expected)
    assert {v["count"] for _, v in aggregates if v["thing"] == "Talking"} == {2}
    assert {v["count"] for _, v in aggregates if v["thing"] == "Silent"} == {1}
    late = decoded(stack_settings, out.late, "late")
    assert aside_of(late) == expected.late_topic()
    reasons = Counter(r["reason"] for _, r in late)
    assert (
        reasons["duplicate"] >= 10
        and reasons["behind_watermark"] >= 1
        and reasons["window_closed"] == 1
    ), reasons
    assert [r["row_id"] for _, r in late if r["reason"] == "superseded"] == ["p1"]
    assert ("probe", "p2") in {
        (r["quantity"], r["row_id"]) for _, r in late if r["reason"] == "behind_watermark"
    }
    assert all(r["stage"] == "aggregate" and r["watermark_ms"] is not None for _, r in late)

    event_time_s = query_metric("spark_event_time_seconds")
    assert event_time_s is not None, "spark_event_time_seconds missing from /metrics"
    assert event_time_s * 1000 == max(r[2] for r in phase1 + phase2)  # newest read
    assert query_metric("spark_input_rows_total") == everything


def wait_for(
    settings: Settings,
    topic: str,
    count: int,
    service,
    log: Path,
    timeout_s: float = 240,
    *,
    match=lambda record: True,
) -> None:
    schema = "late" if ".late." in topic else "aggregate"
    found = 0

    def enough() -> bool:
        nonlocal found
        assert service.alive(), f"job died: {log_tail(log)}"
        found = sum(1 for _, r in decoded(settings, topic, schema) if match(r))
        return found >= count

    try:
        wait_until(enough, timeout_s, f"{count} records in {topic}", interval_s=1)
    except TimedOut:
        raise TimedOut(
            f"{topic}: {found} of {count} records after {timeout_s}s: {log_tail(log)}"
        ) from None


def test_aggregates_of_the_joined_power(stack_settings: Settings, tmp_path: Path) -> None:
    """--source joined: each join result (here mechanical_power) aggregated as a quantity of its
    own, keyed and judged like a raw quantity, in the joined topic's arrival order. A pattern
    pair's result is its component's own series (``mechanical_power_C11``); a pair written
    before the component field existed reads as an explicit pair's (``mechanical_power``)."""
    import fastavro

    from lsb import JoinConfig, JoinedPair, LocalStreamBuffer
    from streamkit.wire import schema_before

    config = JoinConfig.single("actSpeed_C11", "vaTorque_C11")
    buffer = LocalStreamBuffer(config)
    pairs: list[JoinedPair] = []
    for thing, quantity, t, value in distinct_records(file_rows(SAMPLE)):
        if quantity in ("actSpeed_C11", "vaTorque_C11"):
            pairs.extend(buffer.push(thing, quantity, t, value).pairs.to_records(thing, config))
    assert len(pairs) > 1000
    older_things = {sorted({p.key for p in pairs})[0]}  # its pairs in the older layout
    as_records: list[Record] = [
        (
            p.key,
            "mechanical_power" if p.key in older_things else "mechanical_power_C11",
            p.event_time,
            p.result,
            p.id,
        )
        for p in pairs
    ]
    specs = [TUMBLING, SLIDING]
    expected = window_oracle(
        as_records, specs, LATENESS_MS, same_by_row_id=True
    )  # pairs share event times
    assert expected.windows
    assert {w[1] for w in expected.windows} == {"mechanical_power", "mechanical_power_C11"}

    joined = private_topic(stack_settings, "joined", 1)
    codec = AvroCodec("joined")
    older = fastavro.parse_schema(json.loads(schema_before("joined")))

    def encoded(thing: str, t: int, value: float, row_id: str) -> bytes:
        record = {
            "id": row_id,
            "thing": thing,
            "left_quantity": "actSpeed_C11",
            "right_quantity": "vaTorque_C11",
            "left_time_ms": t,
            "right_time_ms": t,
            "left_value": 0.0,
            "right_value": 0.0,
            "result_name": "mechanical_power",
            "result": value,
            "event_time_ms": t,
        }
        if thing not in older_things:
            return codec.encode({**record, "component": "C11"})
        out = io.BytesIO()
        fastavro.schemaless_writer(out, older, record)
        return out.getvalue()

    produce_committed(
        stack_settings,
        [
            (joined, row_id.encode(), encoded(thing, t, value, row_id), 0)
            for thing, _, t, value, row_id in as_records
        ],
    )
    out = Outputs(stack_settings, tmp_path, "aggjoined")
    service = spark_service(
        "spark_jobs.aggregate",
        [
            "--source",
            "joined",
            "--joined-topic",
            joined,
            *out.args(),
            *window_args(specs, LATENESS_MS),
            "--max-offsets-per-trigger",
            "700",
            "--available-now",
        ],
        out.log,
    ).start()
    assert service.popen.wait(600) == 0, log_tail(out.log)
    assert_windows_equal(decoded(stack_settings, out.aggregates, "aggregate"), expected)
    assert aside_of(decoded(stack_settings, out.late, "late")) == expected.late_topic()


def copies_within_lateness(partitions: int) -> list[Record]:
    """Two things at 1 Hz over 120 s, in arrival order with copies: every 10th record again,
    identical, a few records later; every 7th again with another value, a few more records
    later (both well within the lateness)."""
    a, b = things_on_partitions(partitions)[:2]
    records: list[Record] = []
    for second in range(120):
        t = T0 + second * 1000
        records += [
            (a, "speed", t, float(second % 11), f"a{second}"),
            (b, "speed", t, float(second % 13), f"b{second}"),
        ]
    arrival = list(records)
    for index, record in enumerate(records):
        if index % 10 == 0:
            arrival.insert(min(len(arrival), arrival.index(record) + 7), record)
        if index % 7 == 0:
            arrival.insert(
                min(len(arrival), arrival.index(record) + 11),
                (*record[:3], record[3] + 100.0, record[4]),
            )
    return arrival


def test_a_rerun_over_the_compacted_raw_topic_gives_the_same_windows(
    stack_settings: Settings, tmp_path: Path
) -> None:
    """The last copy of a record wins in the aggregates as in Kafka compaction, so a rerun from a
    fresh checkpoint after the broker really compacted the raw topic gives the same windows as
    the first run over the copies. Compaction is switched on only after the first run."""
    settings, partitions = stack_settings, stack_settings.topic_partitions
    raw = f"test.raw.{uuid.uuid4().hex[:10]}"
    uncompacted = {"cleanup.policy": "delete", "segment.ms": "100"}
    provision(settings, [TopicSpec(raw, partitions, uncompacted, role="raw")])
    arrival = copies_within_lateness(partitions)
    produce_measurements(settings, raw, arrival, partitions)
    # The closers (one per key, so one per data partition) come a second later: their appends
    # roll the data's segments, and only the active segment is never compacted.
    time.sleep(
        1
    )  # the scenario: the broker rolls a segment by age (segment.ms 100), so time must pass
    closers = [
        (thing, "speed", T0 + 200_000, 0.0, f"{thing}-closer")
        for thing in sorted({r[0] for r in arrival})
    ]
    produce_measurements(settings, raw, closers, partitions)
    arrival += closers
    keys = {(thing, quantity, t) for thing, quantity, t, _, _ in arrival}
    assert len(keys) < len(arrival) - 40  # there are copies to compact away

    def run(name: str) -> list[tuple[bytes, dict]]:
        out = Outputs(settings, tmp_path, name)
        service = spark_service(
            "spark_jobs.aggregate",
            [
                "--raw-topic",
                raw,
                *out.args(),
                *window_args([TUMBLING], LATENESS_MS),
                "--available-now",
                "--max-offsets-per-trigger",
                "50",
            ],
            out.log,
        )
        assert service.start().popen.wait(600) == 0, log_tail(out.log)
        return decoded(settings, out.aggregates, "aggregate")

    first = run("before-compaction")
    expected = window_oracle(arrival, [TUMBLING], LATENESS_MS)
    assert expected.superseded and len(expected.windows) > 20
    assert_windows_equal(first, expected)

    provision(
        settings,
        [
            TopicSpec(
                raw,
                partitions,
                {
                    **uncompacted,
                    "cleanup.policy": "compact",
                    "min.compaction.lag.ms": "0",
                    "min.cleanable.dirty.ratio": "0.01",
                },
            )
        ],
        fix_config=True,
    )
    compacted: list = []

    def compacted_to_keys() -> bool:
        nonlocal compacted
        compacted = read_to_end(settings, raw)
        return len(compacted) <= len(keys)

    settle(compacted_to_keys, 120, f"{raw} compacted", interval_s=2)
    assert len(compacted) == len(keys), f"the broker did not compact {raw} within 120 s"

    rerun = run("after-compaction")
    # The same windows; only closed_at_ms may move (the copy that closed a window may be gone), so
    # it is checked against the oracle of the records the topic holds now.
    codec = AvroCodec("measurement")
    survivors = [
        (r["thing"], r["quantity"], r["event_time_ms"], r["value"], r["row_id"])
        for r in (codec.decode(m.value()) for m in compacted)
    ]
    assert_windows_equal(rerun, window_oracle(survivors, [TUMBLING], LATENESS_MS))
    without_closing = {key: {**value, "closed_at_ms": None} for key, value in first}
    assert {key: {**value, "closed_at_ms": None} for key, value in rerun} == without_closing
