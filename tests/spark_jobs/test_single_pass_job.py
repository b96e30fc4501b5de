"""python -m spark_jobs.single_pass on the real stack against both brute-force oracles at once:
its joined pairs equal the join oracle's, its windows and late records the window oracle's,
exactly once, also when the driver is SIGKILLed at the sink's fault points and restarted."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from mqtt_bridge.records import RowSplitter
from spark_jobs.config import JoinSettings
from stacktools.harness.wiring import Wiring
from stacktools.stack.settings import Settings
from streamkit.wire import AvroCodec
from tests.oracles.pipeline import join_pairs
from tests.oracles.windows import Record, Spec, window_oracle
from tests.support.aggregates import (
    assert_windows_equal,
    decoded,
    produce_measurements,
    window_args,
)
from tests.support.committed import committed_pairs
from tests.support.harness import bridge_rows
from tests.support.messages import headers_of, key_of, value_of
from tests.support.spark import (
    REPO,
    log_tail,
    private_topic,
    produce_committed,
    read_to_end,
    spark_service,
    wait_driver_gone,
)

pytestmark = [pytest.mark.stack, pytest.mark.spark]
SAMPLE = REPO / "tests" / "data" / "test_events.json"
PAIRS = "actSpeed_C11:vaTorque_C11:mechanical_power,vaCurr_C11:vaLoad_C11:product"
LATENESS_MS = 10_000
SPECS = [
    Spec("tumbling", 10_000, 10_000),
    Spec("sliding", 60_000, 20_000),
    Spec("session", 5_000, 5_000),
]
POISON = [b"\xff\xfe not avro", b""]


def sample_records(partitions: int) -> list[Record]:
    """The sample as the bridge writes it (event-time order, its row ids), the last rows re-sent
    (duplicates for both stages) and one reading of a join quantity two hours ahead of now."""
    splitter, codec, records = RowSplitter(partitions), AvroCodec("measurement"), []
    for row in bridge_rows(SAMPLE):
        for record in splitter.split(row):
            d = codec.decode(record.value)
            records.append((d["thing"], d["quantity"], d["event_time_ms"], d["value"], d["row_id"]))
    thing = records[-1][0]
    return [
        *records,
        *records[-60:],
        (thing, "actSpeed_C11", int(time.time() * 1000) + 7_200_000, 1.0, "bad-clock"),
    ]


#: (master, sink, state) -> the driver kills: (fault point, batch). The executors' sink's points
#: are a task's (``<point>@<output partition>``: the hook kills the driver and that task) or the
#: driver's after every partition committed. With the state in the driver, a kill after the
#: produce leaves the batch's state file written and its transaction open. The executors' sink
#: is killed on the launcher's cluster, where its tasks run in executors of their own.
RUNS = {
    ("local", "driver", "executors"): [("after_produce", 1), ("after_commit", 3)],
    ("local", "driver", "driver"): [
        ("before_produce", 0),
        ("after_produce", 1),
        ("after_commit", 3),
    ],
    ("cluster", "executors", "executors"): [
        ("after_produce@0", 1),
        ("after_commit@1", 2),
        ("after_tasks", 3),
    ],
}


@pytest.mark.parametrize(
    "master,sink,state", list(RUNS), ids=[f"{m}-{s}-state-{t}" for m, s, t in RUNS]
)
def test_the_single_pass_equals_both_oracles_exactly_once_through_driver_kills(
    stack_settings: Settings,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    master: str,
    sink: str,
    state: str,
) -> None:
    partitions = stack_settings.topic_partitions
    records = sample_records(partitions)
    lane = Wiring.private(stack_settings, bridge_only=True)
    produce_measurements(stack_settings, lane.raw, records, partitions)
    produce_committed(
        stack_settings,
        [(lane.raw, b"poison-%d" % i, value, i % 2) for i, value in enumerate(POISON)],
    )
    out = {
        kind: private_topic(stack_settings, kind, 2) for kind in ("joined", "aggregates", "late")
    }
    markers = private_topic(stack_settings, "markers", 1, compact=True)
    log = tmp_path / "single-pass.log"
    args = [
        "--raw-topic",
        lane.raw,
        "--dlq-topic",
        lane.dlq,
        "--joined-topic",
        out["joined"],
        "--aggregates-topic",
        out["aggregates"],
        "--late-topic",
        out["late"],
        "--marker-topic",
        markers,
        "--query-name",
        f"single-pass-{uuid.uuid4().hex[:8]}",
        "--checkpoint-dir",
        str(tmp_path / "checkpoint"),
        "--pairs",
        PAIRS,
        *window_args(SPECS, LATENESS_MS),
        "--available-now",
        "--max-offsets-per-trigger",
        "4000",
        "--opstats-power",  # off: tests/spark_jobs/test_single_pass_opstats.py has them
        "",
    ]
    where = {"SPARK_SINK": sink, "SPARK_SINK_PARTITIONS": "2", "SPARK_STATE": state}
    if master == "cluster":
        where["SPARK_MASTER"] = request.getfixturevalue("spark_cluster")
    for point, batch in RUNS[master, sink, state]:  # killed inside the sink, then restarted
        env = {**where, "EOS_FAULT_POINT": point, "EOS_FAULT_BATCH": str(batch)}
        job = spark_service(
            "tests.drivers.faulty_job", ["spark_jobs.single_pass", *args], log, env
        ).start()
        code = job.popen.wait(600)
        assert code == -9, (point, code, log_tail(log))
        wait_driver_gone(job)  # its JVM exits on stdin EOF: never two drivers on one checkpoint
    assert spark_service("spark_jobs.single_pass", args, log, where).start().popen.wait(600) == 0, (
        log_tail(log)
    )
    ran = log.read_text(errors="replace")
    assert f'"master": "{where.get("SPARK_MASTER", "local[*]")}"' in ran, (
        "the job did not run where it was sent"
    )
    assert ('"logger": "spark_jobs.executor_sink"' in ran) == (sink == "executors"), (
        "another sink wrote the batches"
    )

    now_ms = int(time.time() * 1000)
    on_time = [r for r in records if r[2] <= now_ms + 3_600_000]
    pairs, join_late = join_pairs(
        JoinSettings.from_sources(cli={"pairs": PAIRS}), [r[:4] for r in on_time]
    )
    assert sum(pairs.values()) > 1000 and max(pairs.values()) == 1
    assert committed_pairs(stack_settings, out["joined"]) == pairs

    windows = window_oracle(records, SPECS, LATENESS_MS, now_ms=now_ms, max_future_ms=3_600_000)
    assert len(windows.windows) > 1000
    assert_windows_equal(decoded(stack_settings, out["aggregates"], "aggregate"), windows)

    late = [r for _, r in decoded(stack_settings, out["late"], "late")]
    by_stage = Counter(r["stage"] for r in late)
    assert by_stage["join"] == join_late + 1 and set(by_stage) == {"join", "aggregate"}, by_stage
    assert (
        Counter(
            (r["thing"], r["quantity"], r["event_time_ms"], r["row_id"], r["reason"])
            for r in late
            if r["stage"] == "aggregate"
        )
        == windows.late_topic()
    )
    assert [
        r["row_id"] for r in late if r["stage"] == "join" and r["reason"] == "future_timestamp"
    ] == ["bad-clock"]

    letters = [
        (key_of(m), value_of(m), headers_of(m)) for m in read_to_end(stack_settings, lane.dlq)
    ]
    assert sorted((k, v) for k, v, _ in letters) == sorted(
        (b"poison-%d" % i, v) for i, v in enumerate(POISON)
    )
    assert {(h["reason"], h["stage"]) for _, _, h in letters} == {(b"undecodable", b"single_pass")}
