"""Undecodable records in the Spark jobs' input (garbage, a truncated datum, a record without a
value) on the real stack: each job dead-letters every one exactly once, in its own
transaction, and its output over the rest equals the oracle; a restart from the checkpoint
neither fails on them again nor dead-letters them twice."""
from __future__ import annotations

import zlib
from collections import Counter
from pathlib import Path

import pytest

from spark_jobs.join import JoinSettings
from streamkit.avro_codec import AvroCodec
from streamkit.config import Settings
from tests.committed import committed_pairs
from tests.oracles import join_pairs
from tests.spark.helpers import log_tail, private_topic, produce_committed, read_to_end, spark_service
from tests.spark.test_aggregate_job import LATENESS_MS, TUMBLING, T0, Outputs, assert_windows_equal, decoded, window_args
from tests.window_oracle import window_oracle

pytestmark = pytest.mark.stack
PAIRS = "speed:torque:product"


def input_with_bad_records(partitions: int) -> tuple[list[tuple], list[tuple[bytes, bytes | None, int]]]:
    """One machine at 1 Hz for 300 s (speed and torque) and, among them, three records that
    are not a measurement. Returns (good records, bad (key, value, partition))."""
    good = [("M1", quantity, T0 + s * 1000, float(s % 9), f"r{s}") for s in range(300) for quantity in ("speed", "torque")]
    valid = AvroCodec("measurement").encode({"thing": "M1", "quantity": "speed", "event_time_ms": T0, "value": 1.0,
                                             "row_id": "x"})
    partition = zlib.crc32(b"M1") % partitions
    bad = [(b"M1|speed|garbage", b"\xff\xfe not avro at all", partition),
           (b"M1|speed|truncated", valid[:6], partition),
           (b"M1|speed|no-value", None, partition)]
    return good, bad


def feed(settings: Settings, topic: str, good: list[tuple], bad: list[tuple], partitions: int) -> None:
    codec = AvroCodec("measurement")
    rows = [(topic, f"{t}|{q}|{ms}".encode(), codec.encode({"thing": t, "quantity": q, "event_time_ms": ms, "value": v,
                                                           "row_id": r}), zlib.crc32(t.encode()) % partitions)
            for t, q, ms, v, r in good]
    for index, (key, value, partition) in enumerate(bad):  # spread among the good ones
        rows.insert(100 + index * 200, (topic, key, value, partition))
    produce_committed(settings, rows)


def dead_letters(settings: Settings, topic: str) -> Counter:
    out: Counter = Counter()
    for message in read_to_end(settings, topic):
        headers = {k: v.decode() for k, v in message.headers() or []}
        out[(message.key(), message.value(), headers["reason"], headers["stage"], headers["source"])] += 1
    return out


def test_undecodable_records_are_dead_lettered_once_by_each_job(stack_settings: Settings, tmp_path: Path) -> None:
    settings, partitions = stack_settings, 2
    raw = private_topic(settings, "raw", partitions)
    good, bad = input_with_bad_records(partitions)
    feed(settings, raw, good, bad, partitions)

    # the aggregate job, run twice over the same checkpoint
    out, agg_dlq = Outputs(settings, tmp_path, "aggregate"), private_topic(settings, "dlq", 1)
    args = ["--raw-topic", raw, "--dlq-topic", agg_dlq, *out.args(), *window_args([TUMBLING]), "--available-now",
            "--max-offsets-per-trigger", "200"]
    for _ in range(2):
        job = spark_service("spark_jobs.aggregate", args, out.log).start()
        assert job.process.wait(600) == 0, log_tail(out.log)
    want = Counter({(key, value, "undecodable", "aggregate", raw): 1 for key, value, _ in bad})
    assert dead_letters(settings, agg_dlq) == want
    assert_windows_equal(decoded(settings, out.aggregates, "aggregate"), window_oracle(good, [TUMBLING], LATENESS_MS))

    # the join job, run twice over the same checkpoint
    joined, late, markers = (private_topic(settings, "joined"), private_topic(settings, "late"),
                             private_topic(settings, "markers", 1, compact=True))
    join_dlq, log = private_topic(settings, "dlq", 1), tmp_path / "join.log"
    args = ["--raw-topic", raw, "--dlq-topic", join_dlq, "--joined-topic", joined, "--late-topic", late,
            "--marker-topic", markers, "--checkpoint-dir", str(tmp_path / "join-checkpoint"),
            "--query-name", f"join-{raw}", "--pairs", PAIRS, "--shuffle-partitions", "2", "--available-now",
            "--max-offsets-per-trigger", "200"]
    for _ in range(2):
        job = spark_service("spark_jobs.join", args, log).start()
        assert job.process.wait(600) == 0, log_tail(log)
    assert dead_letters(settings, join_dlq) == Counter({(k, v, "undecodable", "join", raw): n
                                                        for (k, v, _, _, _), n in want.items()})
    expected, _ = join_pairs(JoinSettings.from_sources(cli={"run_dir": settings.run_dir, "pairs": PAIRS}),
                             [record[:4] for record in good])
    assert sum(expected.values()) >= 300
    assert committed_pairs(settings, joined) == expected
