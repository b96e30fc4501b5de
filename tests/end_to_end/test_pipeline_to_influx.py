"""The whole pipeline into InfluxDB, then the dashboards on what it wrote.

simulator -> Mosquitto -> bridge -> Kafka -> Spark join + aggregates -> Kafka -> connector ->
InfluxDB, every service a real process on the local stack, scraped by the real Prometheus;
once on the main stack and once scaled out (the Spark cluster with the executors' sink, two
sharded bridges, three Kafka nodes: tests/support/topology.py).
Afterwards InfluxDB must hold exactly what Kafka committed (per measurement, point by point),
and every panel and variable query of every dashboard must return data.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import pytest

from stacktools.dashboards import check_dashboards
from stacktools.dashboards.settings import DashboardSettings
from stacktools.harness.pipeline import Pipeline
from stacktools.harness.processes import ServiceProcess
from stacktools.harness.wiring import Wiring
from stacktools.stack.influx import InfluxClient
from streamkit.deadline import TimedOut, wait_until
from streamkit.kafka_io import read_to_end
from streamkit.paths import REPO_ROOT
from streamkit.wire.retention import source
from tests.oracles.join import parse_pairs
from tests.oracles.pipeline import PipelineSpec, default_stats
from tests.oracles.rows import file_rows, measurements
from tests.oracles.windows import Spec
from tests.support.exactness import assert_pipeline_exact
from tests.support.harness import expected_records, quick_single_pass_args, wait_for_keys
from tests.support.influx_checks import point_count
from tests.support.mqtt import RawPublisher
from tests.support.topology import Topology
from tests.support.waits import settle

pytestmark = [pytest.mark.stack, pytest.mark.spark]
SAMPLE = REPO_ROOT / "tests" / "data" / "test_events.json"
ROW_SPACING_MS = 100
#: The single pass with its default join, windows and statistics (spark_jobs.config), a 500 ms
#: session gap and reference cycles of a minute (the replay lasts minutes: the dashboard's cycles).
SINGLE_PASS_DEFAULTS = PipelineSpec(
    pairs=tuple(parse_pairs("actSpeed_*:vaTorque_*:mechanical_power")),
    windows=(Spec("tumbling", 10_000, 10_000), Spec("session", 500, 500)),
    lateness_ms=10_000,
    stats=dataclasses.replace(default_stats(), cycle_ms=60_000),
)
OPSTATS_CYCLE = ["--opstats-cycle", "1min"]
BAD_PAYLOADS = [
    b"not json",
    b'{"Thing": "T", "Timestamp": 1}',
    b'{"Thing": "T", "Timestamp": 1554000000000, "x": "hi"}',
]


def recent_events(path: Path, end_ms: int) -> Path:
    """The sample in its own (unsorted) file order, re-timed into the minutes before `end_ms`:
    rows keep their event-time order but are ROW_SPACING_MS apart, so the data, the late
    records and the services' metrics all fall into one dashboard time range."""
    rows = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]
    ranked = sorted(range(len(rows)), key=lambda i: (rows[i]["Timestamp"], rows[i]["Thing"]))
    first = end_ms - len(rows) * ROW_SPACING_MS
    for rank, index in enumerate(ranked):
        rows[index]["Timestamp"] = first + rank * ROW_SPACING_MS
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def wait_for_input_rows(
    log: Path, rows: int, job: ServiceProcess, timeout_s: float, *, then_idle: bool = False
) -> None:
    """Until a streaming job's progress lines account for `rows` input records: it has read
    the whole raw topic (and keeps running, so Prometheus sees its final counters). With
    `then_idle`, also until a batch without input ran after that: the no-data batch in which a
    windowed job's advanced watermark closes its windows."""
    seen, idle = 0, False

    def caught_up() -> bool:
        nonlocal seen, idle
        seen, idle = 0, False
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith("{") and '"batch progress"' in line:
                input_rows = json.loads(line).get("input_rows", 0)
                idle = seen >= rows and input_rows == 0
                seen += input_rows
        if seen >= rows and (idle or not then_idle):
            return True
        assert job.alive(), log.read_text(errors="replace")[-3000:]
        return False

    try:
        wait_until(caught_up, timeout_s, f"{log.name}: {rows} input rows", interval_s=2)
    except TimedOut:
        raise TimedOut(
            f"{log.name}: {seen} of {rows} input rows (idle batch: {idle}) after {timeout_s}s"
        ) from None


def test_pipeline_lands_exactly_in_influxdb_and_every_panel_has_data(
    topology: Topology, tmp_path: Path
) -> None:
    settings = topology.settings
    started_ms = int(time.time() * 1000)
    events = recent_events(tmp_path / "events.json", started_ms)
    wiring = Wiring.private(settings)
    topics = wiring.connector_topics
    quick = quick_single_pass_args()
    quick["spark_single_pass"] += OPSTATS_CYCLE
    spec = SINGLE_PASS_DEFAULTS  # the statistics run wherever the state lives
    pipeline = Pipeline(
        settings,
        wiring,
        tmp_path / "run",
        extra_args=quick,
        env=topology.env,
        bridges=topology.bridges,
    )
    try:
        pipeline.start_stages()
        pipeline.wait_bridges()
        sim = pipeline.replay(events, "--order", "file", "--rate", "400")
        assert sim.popen.wait(300) == 0, pipeline.log("simulator").read_text()[-2000:]
        publisher = RawPublisher(
            settings.acting_as("mqtt", "machine"),
            max_inflight=10,
            client_prefix=f"bad-{wiring.prefix}",
        )
        for payload in BAD_PAYLOADS:
            publisher.publish_raw(f"{topology.machine_prefix(wiring.prefix)}/bad", payload)
        assert publisher.wait_all_acked(len(BAD_PAYLOADS))
        publisher.close()
        expected_raw = expected_records(events)
        assert set(expected_raw) <= wait_for_keys(settings, topics["raw"], set(expected_raw), 120)
        raw_count = len(read_to_end(settings, topics["raw"]))
        wait_for_input_rows(
            pipeline.log("spark_single_pass"),
            raw_count,
            pipeline.services["spark_single_pass"],
            600,
            then_idle=True,
        )

        # Every output topic and measurement equal to the oracle, values included; the file's own
        # order makes late records at both stages, which must be the oracle's too.
        records = measurements(file_rows(events))
        print(
            assert_pipeline_exact(
                settings,
                {kind: topics[kind] for kind in ("raw", "joined", "aggregates", "late")},
                wiring.database,
                spec,
                records,
                timeout_s=300,
                meanwhile=lambda: (
                    pipeline.services["db_connector"].alive()
                    or pytest.fail(pipeline.log("db_connector").read_text()[-3000:])
                ),
            )
        )
        late_stages = {
            r["stage"]
            for r in InfluxClient(settings).rows(wiring.database, f"SELECT * FROM {source('late')}")
        }
        # the file order makes late records at every stage
        stages = {"join", "aggregate", "opstats"}
        assert late_stages == stages, late_stages
        dead_letters = len(read_to_end(settings, topics["dlq"]))
        assert dead_letters == len(BAD_PAYLOADS)
        settle(
            lambda: point_count(settings, wiring.database, "dead_letter") == dead_letters,
            60,
            "the dead letters",
        )
        assert point_count(settings, wiring.database, "dead_letter") == dead_letters

        time.sleep(12)  # two more scrapes of the long-running services
        thing = min(m.thing for m in records)
        results = check_dashboards(
            DashboardSettings.of(settings),
            started_ms - len(records) * ROW_SPACING_MS - 60_000,
            int(time.time() * 1000) + 5_000,
            {"thing": thing},
            database=wiring.database,
        )
        assert any(r.dashboard == "Operation statistics" for r in results)
        # every query runs; every panel and variable has data (the sample overloads nothing:
        # the overload annotation's events have their test, tests/end_to_end/test_overload_alerts)
        failed = [
            f"{r.dashboard} / {r.panel} / {r.ref_id}: {r.error or 'no data'} :: {r.query[:200]}"
            for r in results
            if r.error or (not r.series and r.kind != "annotation")
        ]
        assert [r.panel for r in results if r.kind == "annotation"] == [
            "annotation Overload alerts"
        ]
        assert results and not failed, "\n".join(failed)
    finally:
        codes = pipeline.stop()
        InfluxClient(settings).drop_database(wiring.database)
    assert all(code == 0 for code in codes.values()), codes
