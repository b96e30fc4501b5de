"""The operation statistics on the real stack, wherever they run: the single pass with its state
in the driver or in Spark's state store, and the two-jobs shape's join job. Machines with a
spindle and two axes; their cycles and overload alerts, in the same transactions as the rest,
equal the brute-force oracle's cycle by cycle, exactly once through a driver kill."""

from __future__ import annotations

import json
import math
import uuid
from collections import Counter
from pathlib import Path

import pytest

from mqtt_bridge.records import RowSplitter
from simulator.generate import generate
from stacktools.harness.wiring import Wiring
from stacktools.stack.settings import Settings
from streamkit.wire import AvroCodec, cycle_key
from tests.oracles import opstats as oracle
from tests.support.aggregates import decoded, produce_measurements
from tests.support.harness import bridge_rows
from tests.support.spark import REPO, log_tail, private_topic, spark_service, wait_driver_gone

pytestmark = [pytest.mark.stack, pytest.mark.spark]

CYCLE_MS, HOLD_MS, PARTNER_MS = 600_000, 60_000, 300_000
#: examples/machine-catalogue.yaml for the generated machines, as its comments say
SPINDLE = (15_000.0, (0.0, 20.0, 40.0, 60.0, 80.0, 100.0), 10.0)
AXIS = (4_000.0, (0.0, 25.0, 50.0, 75.0, 100.0), 10.0)


def records(tmp_path: Path, partitions: int) -> list[tuple[str, str, int, float, str]]:
    """Two machines with three drives for about 40 minutes, as the bridge writes them, the last
    rows re-sent."""
    events = tmp_path / "events.json"
    events.write_text(
        "".join(json.dumps(row) + "\n" for row in generate(5000, 2, seed=21, components=3))
    )
    splitter, codec, out = RowSplitter(partitions), AvroCodec("measurement"), []
    for row in bridge_rows(events):
        for record in splitter.split(row):
            d = codec.decode(record.value)
            out.append((d["thing"], d["quantity"], d["event_time_ms"], d["value"], d["row_id"]))
    return [*out, *out[-40:]]


def definition() -> oracle.Definition:
    def rating(thing: str, component: str) -> tuple[float, tuple[float, ...], float]:
        return SPINDLE if component == "C11" else AXIS

    return oracle.Definition(
        ("actSpeed_", ""),
        ("vaTorque_", ""),
        lambda n, m: 2.0 * math.pi / 60.0 * n * m,
        rating,
        CYCLE_MS,
        HOLD_MS,
        PARTNER_MS,
    )


#: job module, its environment, the fault point its driver is killed at (batch 1)
WHERE = {
    "single-pass, state in the driver": (
        "spark_jobs.single_pass",
        {"SPARK_STATE": "driver", "SPARK_SINK": "driver"},
        "after_produce",
    ),
    "single-pass, state in Spark's store": (
        "spark_jobs.single_pass",
        {"SPARK_STATE": "executors", "SPARK_SINK": "executors"},
        "after_produce@0",
    ),
    "two-jobs: the join job": ("spark_jobs.join", {}, "after_produce"),
}


@pytest.mark.parametrize("where", list(WHERE))
def test_the_operation_statistics_equal_the_oracle_exactly_once_through_a_driver_kill(
    stack_settings: Settings, tmp_path: Path, where: str
) -> None:
    module, env, fault_point = WHERE[where]
    partitions = stack_settings.topic_partitions
    data = records(tmp_path, partitions)
    lane = Wiring.private(stack_settings, bridge_only=True)
    produce_measurements(stack_settings, lane.raw, data, partitions)
    kinds = ("joined", "late", "opstats") + (("aggregates",) if "single_pass" in module else ())
    out = {kind: private_topic(stack_settings, kind, 2) for kind in kinds}
    out["overloads"] = private_topic(stack_settings, "overloads", 2, compact=True)
    markers = private_topic(stack_settings, "markers", 1, compact=True)
    log = tmp_path / "job.log"
    args = [
        "--raw-topic",
        lane.raw,
        "--dlq-topic",
        lane.dlq,
        *[arg for kind, topic in out.items() for arg in (f"--{kind}-topic", topic)],
        "--marker-topic",
        markers,
        "--query-name",
        f"opstats-{uuid.uuid4().hex[:8]}",
        "--checkpoint-dir",
        str(tmp_path / "checkpoint"),
        "--available-now",
        "--max-offsets-per-trigger",
        "6000",
    ]
    where_env = {
        **env,
        "OPSTATS_POWER": "actSpeed_*:vaTorque_*:mechanical_power",
        "MACHINE_CATALOGUE": str(REPO / "examples" / "machine-catalogue.yaml"),
    }
    faulty = {**where_env, "EOS_FAULT_POINT": fault_point, "EOS_FAULT_BATCH": "1"}
    job = spark_service("tests.drivers.faulty_job", [module, *args], log, faulty).start()
    assert job.popen.wait(600) == -9, log_tail(log)
    wait_driver_gone(job)
    done = spark_service(module, args, log, where_env).start().popen.wait(600)
    assert done == 0, log_tail(log)

    certain, want_late = oracle.certain(data, definition())
    got = decoded(stack_settings, out["opstats"], "opstats")
    keys = Counter(key for key, _ in got)
    assert max(keys.values()) == 1, "a cycle written twice"
    have = {(r["thing"], r["component"], r["cycle_start_ms"]): (key, r) for key, r in got}
    assert have.keys() == certain.keys(), (
        sorted(certain.keys() - have.keys())[:3],
        sorted(have.keys() - certain.keys())[:3],
    )
    assert {c for _, c, _ in have} == {"C11", "C12", "C13"} and len(have) >= 20
    for k, (key, r) in have.items():
        w = certain[k]
        assert key == cycle_key(k[0], k[1], r["rating_id"], k[2])
        assert (tuple(r["band_ms"]), tuple(r["cumulative_ms"]), r["data_ms"]) == (
            w["band_ms"],
            w["cumulative_ms"],
            w["data_ms"],
        ), k
        assert r["peak_w"] == w["peak_w"], k
        assert r["duty_pct"] == pytest.approx(float(w["duty_pct"]), rel=1e-12), k
        for name in ("motoring_kwh", "regenerative_kwh", "mean_w"):
            assert r[name] == pytest.approx(float(w[name]), rel=1e-9, abs=1e-15), (k, name)
    assert any(r["duty_pct"] > r["duty_rating_pct"] for _, r in have.values())

    late = [r for _, r in decoded(stack_settings, out["late"], "late") if r["stage"] == "opstats"]
    expected_late = Counter(
        (thing, q, t, row_id, reason) for thing, q, t, _, row_id, reason in want_late
    )
    assert expected_late, "the re-sent rows make late records"
    assert (
        Counter(
            (r["thing"], r["quantity"], r["event_time_ms"], r["row_id"], r["reason"]) for r in late
        )
        == expected_late
    )

    alerts = decoded(stack_settings, out["overloads"], "overload")
    assert max(Counter((key, repr(sorted(r.items()))) for key, r in alerts).values()) == 1
    assert sorted(
        (r["thing"], r["component"], r["status"], r["since_ms"], r["cycle_start_ms"], r["why"])
        for _, r in alerts
    ) == sorted(oracle.events(certain, definition()))
    assert alerts, "the generated axes overload"
