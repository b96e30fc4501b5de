"""A new user's first run: the README's main command, typed as the README spells it, from an
empty run directory (no credentials, no data) on ports of its own; then a second run in the same
run directory against a stack that is already up. The summary is checked against what the data
says, not against what the services report about themselves."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from spark_jobs.config import JoinSettings
from stacktools.config_reference.render import env_of
from stacktools.config_reference.sections import SECTIONS
from stacktools.stack import Stack
from stacktools.stack.settings import Settings
from streamkit.paths import REPO_ROOT
from tests.oracles.join import parse_pairs
from tests.oracles.pipeline import PipelineSpec, default_stats, distinct_records, join_pairs
from tests.oracles.rows import event_time_order, file_rows, measurements
from tests.oracles.windows import Spec
from tests.support.exactness import assert_pipeline_exact
from tests.support.ports import free_ports

pytestmark = [pytest.mark.stack, pytest.mark.spark]
SAMPLE = Path("tests/data/test_events.json")  # as the README spells it: relative to the clone
#: The demo's pipeline with a user's defaults (spark_jobs.config): the join, tumbling 10 s windows.
DEMO_PIPELINE = PipelineSpec(
    pairs=tuple(parse_pairs("actSpeed_*:vaTorque_*:mechanical_power")),
    windows=(Spec("tumbling", 10_000, 10_000),),
    lateness_ms=10_000,
    stats=default_stats(),
)
PLOTS = (
    "throughput.png",
    "latency.png",
    "joined_power.png",
    "window_aggregates.png",
    "operation_statistics.png",
)


def user_environment(run_dir: Path) -> dict[str, str]:
    """This machine's environment without any of the project's settings (a user has none),
    plus an empty run directory and ports no other stack uses."""
    ours = {
        env_of(field)
        for section in SECTIONS
        for field in dataclasses.fields(section.settings_class())
    }
    ours.add("STACK_ALLOW_EXTERNAL")
    env = {k: v for k, v in os.environ.items() if k not in ours}
    kafka, controller, mqtt, influx, prometheus, alertmanager = free_ports(6)
    env.update(
        STACK_RUN_DIR=str(run_dir),
        KAFKA_PORT=str(kafka),
        KAFKA_CONTROLLER_PORT=str(controller),
        MQTT_PORT=str(mqtt),
        INFLUX_PORT=str(influx),
        PROMETHEUS_PORT=str(prometheus),
        ALERTMANAGER_PORT=str(alertmanager),
    )
    return env


def run_demo(env: dict[str, str], out: Path) -> str:
    done = subprocess.run(
        ["scripts/demo.sh", "--events", str(SAMPLE), "--out", str(out)],
        cwd=REPO_ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert done.returncode == 0, (
        f"demo failed ({done.returncode}):\n{done.stdout[-4000:]}\n{done.stderr[-6000:]}"
    )
    return done.stdout


def expected_pairs(env: dict[str, str]) -> int:
    """The join library's pairs for the sample in replay order, as an unfinished stream."""
    settings = JoinSettings.from_sources(environ=env)
    pairs, late = join_pairs(
        settings, distinct_records(event_time_order(file_rows(REPO_ROOT / SAMPLE)))
    )
    assert late == 0  # the replay is in event-time order
    return sum(pairs.values())


def check_summary(out: Path, pairs: int) -> dict:
    summary = json.loads((out / "summary.json").read_text())
    points = summary["influxdb_points"]
    assert summary["rows_in_file"] == summary["rows_published"] == 5_000, summary
    assert summary["raw_records"] == points["raw"] == 19_825, summary
    assert points["joined"] == pairs, summary
    assert points["aggregate"] > 0, summary
    assert summary["dead_lettered_by_bridge"] == points["dead_letter"] == 0, summary
    # the operation statistics of the sample's one drive, as printed and drawn
    cycles = summary["operation_statistics"]["per_component"]["C11"]
    assert cycles["cycles"] == points["opstats"] > 100, summary
    assert sum(cycles["band_hours"].values()) > 1 and cycles["energy_kwh"] > 0, summary
    assert summary["overload_alerts"]["firing"] == 0, summary  # 2 % of the default rating
    for name in PLOTS:
        data = (out / name).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 10_000, name
    return summary


def check_status_lines(stdout: str) -> None:
    """What the user watches: the simulator's rows show as soon as the bridge has records of them
    (a replay of 5,000 rows takes about a second, less than the sampling interval)."""
    lines = re.findall(r"simulator rows ([\d,]+) \| bridge records ([\d,]+)", stdout)
    assert lines, stdout
    for simulator, bridge in lines:
        assert int(bridge.replace(",", "")) == 0 or int(simulator.replace(",", "")) > 0, lines


def test_first_run_from_an_empty_run_dir_then_again_on_the_running_stack(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    env = user_environment(run_dir)
    pairs = expected_pairs(env)
    assert pairs > 1000

    first = run_demo(env, tmp_path / "first")
    summary = check_summary(tmp_path / "first", pairs)
    check_status_lines(first)
    assert "p99" in first
    assert (run_dir / "credentials.env").stat().st_mode & 0o077 == 0
    settings = Settings.from_sources(environ=env)
    stack = Stack(settings)
    assert all(s.state == "stopped" for s in stack.status()), (
        "the demo must stop the stack it started"
    )

    try:  # the user leaves the stack up and runs the demo again in the same run directory
        stack.up()
        pids = {s.name: s.pid for s in stack.status()}
        run_demo(env, tmp_path / "second")
        again = check_summary(tmp_path / "second", pairs)
        assert (
            again["raw_topic"] != summary["raw_topic"] and again["database"] != summary["database"]
        )
        after = stack.status()
        assert {s.name: s.pid for s in after} == pids and all(
            s.state == "running" for s in after
        ), "the second run must reuse the running stack and leave it running"
        # What the second run left in Kafka and InfluxDB, by value against the oracles.
        topics = {kind: again["topics"][kind] for kind in ("raw", "joined", "aggregates", "late")}
        print(
            assert_pipeline_exact(
                settings,
                topics,
                again["database"],
                DEMO_PIPELINE,
                measurements(event_time_order(file_rows(REPO_ROOT / SAMPLE))),
                timeout_s=60,
            )
        )
    finally:
        stack.down()
