"""The idle flush on the real stack, in both shapes (the single pass with its state in the driver,
and the join job): a machine that stops has its last pending pair, and its last cycle of
operation statistics (beside the join in both), emitted once the idle timeout has passed, not
when it runs again; when it resumes the join goes on, and a record behind what the flush
emitted is handed back as late, never joined or counted. The pair is a pattern pair: its
component rides along."""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path

import pytest

from stacktools.stack.settings import Settings
from streamkit.deadline import TimedOut, wait_until
from tests.support.aggregates import decoded, produce_measurements
from tests.support.spark import log_tail, private_topic, spark_service

pytestmark = [pytest.mark.stack, pytest.mark.spark]
T0 = 1_554_000_000_000
IDLE_S = 15
THING = "Stops"
PAIRS = "speed_*:torque_*:product"
COMPACTED = ("markers", "opstats", "overloads")
JOBS = {
    "single-pass": (
        "spark_jobs.single_pass",
        ["--tumbling", "10s", "--sliding", "off", "--session-gap", "off"],
        {"SPARK_STATE": "driver"},
    ),
    "join": ("spark_jobs.join", [], {}),
}
#: speed 1, 6 and 10 s with torque at 5 s: (1, 5) and (6, 5) at once; (10, 5) only once torque
#: passes 10 s, or the idle flush
STOPS = [
    (THING, "speed_C1", T0 + 1000, 1.0, "s1"),
    (THING, "torque_C1", T0 + 5000, 2.0, "t5"),
    (THING, "speed_C1", T0 + 6000, 3.0, "s6"),
    (THING, "speed_C1", T0 + 10_000, 4.0, "s10"),
]
#: resumes: torque 8 s is behind the flushed (10, 5); torque 12 s is the next torque of speed 6 s
#: and 10 s. Both are in the statistics' cycle the flush closed (10 min from T0)
RESUMES = [
    (THING, "torque_C1", T0 + 8000, 5.0, "t8"),
    (THING, "torque_C1", T0 + 12_000, 6.0, "t12"),
]


def pairs_of(settings: Settings, topic: str) -> Counter:
    found = decoded(settings, topic, "joined")
    assert {r["component"] for _, r in found} <= {"C1"}
    return Counter((r["left_time_ms"] - T0, r["right_time_ms"] - T0) for _, r in found)


def late_of(settings: Settings, topic: str, stage: str) -> list[tuple[str, str]]:
    found = decoded(settings, topic, "late")
    return sorted((r["row_id"], r["reason"]) for _, r in found if r["stage"] == stage)


def cycles_of(settings: Settings, topic: str) -> list[tuple[str, int]]:
    found = decoded(settings, topic, "opstats")
    return [(r["component"], r["cycle_start_ms"] - T0) for _, r in found]


@pytest.mark.parametrize("job", sorted(JOBS))
def test_a_stopped_machines_last_pair_comes_after_the_idle_timeout_and_it_resumes(
    stack_settings: Settings, tmp_path: Path, job: str
) -> None:
    settings = stack_settings
    module, extra, env = JOBS[job]
    topics = {
        name: private_topic(settings, name, 1, compact=name in COMPACTED)
        for name in ("raw", "joined", "late", "aggregates", "dlq", *COMPACTED)
    }
    args = [
        "--raw-topic",
        topics["raw"],
        "--joined-topic",
        topics["joined"],
        "--late-topic",
        topics["late"],
        "--marker-topic",
        topics["markers"],
        "--dlq-topic",
        topics["dlq"],
        "--query-name",
        f"idle-{job}-{uuid.uuid4().hex[:8]}",
        "--checkpoint-dir",
        str(tmp_path / "checkpoint"),
        "--pairs",
        PAIRS,
        "--idle-timeout",
        f"{IDLE_S}s",
        "--trigger",
        "500ms",
        "--opstats-power",
        PAIRS,
        "--opstats-topic",
        topics["opstats"],
        "--overloads-topic",
        topics["overloads"],
        *extra,
    ]
    if module == "spark_jobs.single_pass":
        args += ["--aggregates-topic", topics["aggregates"]]
    log = tmp_path / f"{job}.log"
    produce_measurements(settings, topics["raw"], STOPS, 1)
    service = spark_service(module, args, log, env).start()

    def until(what: str, check, timeout_s: float) -> None:
        def ready() -> bool:
            assert service.alive(), f"job died: {log_tail(log)}"
            return bool(check())

        try:
            wait_until(ready, timeout_s, what, interval_s=0.5)
        except TimedOut:
            raise TimedOut(f"{what} after {timeout_s}s: {log_tail(log)}") from None

    try:
        until("the two certain pairs", lambda: len(pairs_of(settings, topics["joined"])) >= 2, 300)
        assert pairs_of(settings, topics["joined"]) == {(1000, 5000): 1, (6000, 5000): 1}
        assert not cycles_of(settings, topics["opstats"])  # its cycle is still open
        until(
            "the pending pair, flushed",
            lambda: (10_000, 5000) in pairs_of(settings, topics["joined"]),
            IDLE_S * 6,
        )
        until("the open cycle, flushed", lambda: cycles_of(settings, topics["opstats"]), 60)
        produce_measurements(settings, topics["raw"], RESUMES, 1)
        until(
            "the resumed machine's pairs",
            lambda: len(pairs_of(settings, topics["joined"])) >= 5,
            IDLE_S * 6,
        )
        until("its late record", lambda: late_of(settings, topics["late"], "join"), 60)
        until(
            "the statistics' late records",
            lambda: len(late_of(settings, topics["late"], "opstats")) >= 2,
            60,
        )
    finally:
        code = service.terminate(120)
    assert code == 0, f"SIGTERM exit {code}: {log_tail(log)}"
    assert pairs_of(settings, topics["joined"]) == {
        (1000, 5000): 1,
        (6000, 5000): 1,
        (10_000, 5000): 1,
        (6000, 12_000): 1,
        (10_000, 12_000): 1,
    }
    assert late_of(settings, topics["late"], "join") == [("t8", "behind_watermark")]
    assert cycles_of(settings, topics["opstats"]) == [("C1", 0)]
    assert late_of(settings, topics["late"], "opstats") == [
        ("t12", "window_closed"),
        ("t8", "window_closed"),
    ]
