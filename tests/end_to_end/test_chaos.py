"""End-to-end exactly-once under faults: one replay through the whole pipeline while the bridge,
the Spark driver (the single pass: the pipeline's default shape) and the connector are killed with SIGKILL at random points and the Kafka
broker is restarted once. Every stage is supervised (restarted when it is not running), as
systemd or compose would. At the end the committed Kafka outputs and InfluxDB must equal what
an oracle computes offline from the same file: 0 lost, 0 duplicated. The windows and the
late records of the windows must equal the window oracle over the raw topic in arrival order
(re-sends included), whatever the faults did to the batches. One fault stops the Spark stage
with the windows for a minute, so it catches up with large, skewed batches; one Thing is five times as dense as
the others.

The same round runs a second time scaled out: on the launcher's Spark standalone cluster (two
workers, the executors' sink), two bridges on disjoint Thing shards (each killed), and a stack
of three Kafka nodes, where one Kafka node is killed
with SIGKILL mid-replay and restarted later, and one Spark worker is killed with its executor
(its process group: a lost machine) and restarted, besides each stage's kill.

Knobs: CHAOS_KILLS_PER_STAGE (2; 1 scaled out), CHAOS_SEED (random; printed), CHAOS_ROWS (12000;
half scaled out), CHAOS_AGGREGATE_PAUSE_S (60).
"""
from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path

import pytest

from simulator.generate import generate
from streamkit.config import Settings
from streamkit.deadline import Deadline
from stacktools.influx import InfluxClient
from stacktools.pipeline import Pipeline
from stacktools.services import WINDOWED
from stacktools.wiring import Wiring
from stacktools.stack import Stack
from stacktools.stack.components import SparkWorker, spark_cluster
from tests.support.oracles.pipeline import distinct_records, file_rows
from tests.support.topology import Topology
from tests.support.exactness import assert_exactly_once, join_oracle, kill_group, pipeline_args, restart_broker
from tests.support.require import cannot_run

pytestmark = [pytest.mark.stack, pytest.mark.spark, pytest.mark.chaos]
KILLS_PER_STAGE = int(os.environ.get("CHAOS_KILLS_PER_STAGE", "2"))
ROWS = int(os.environ.get("CHAOS_ROWS", "12000"))
THINGS = 20
RATE = 150  # rows/s: the replay lasts long enough for every fault to hit it mid-stream
AGGREGATE_PAUSE_S = float(os.environ.get("CHAOS_AGGREGATE_PAUSE_S", "60"))


DENSITY = 5  # one more Thing sends this many times as often as the others


def write_events(path: Path, count: int) -> Path:
    """THINGS machines at their normal rate, and one (DENSE) DENSITY times as often over the
    same span of event time, merged in event-time order."""
    rows = list(generate(count, THINGS, seed=11))
    dense = list(generate(count // THINGS * DENSITY, 1, seed=12))
    first = dense[0]["Timestamp"]
    rows += [{**row, "Thing": "DENSE", "Timestamp": first + (row["Timestamp"] - first) // DENSITY} for row in dense]
    rows.sort(key=lambda row: row["Timestamp"])
    with path.open("w") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")
    return path


def chaos_faults(topology: Topology) -> tuple[list[str], int, int]:
    """The faults besides the stages' kills, the kills per stage and the rows of the round."""
    if not topology.scaled_out:
        return ["kafka-restart", "windows-stopped"], KILLS_PER_STAGE, ROWS
    return ["kafka-node-kill", "spark-worker-kill"], int(os.environ.get("CHAOS_KILLS_PER_STAGE", "1")), ROWS // 2


@pytest.fixture
def pipeline(topology: Topology, tmp_path: Path):
    wiring = Wiring.private(topology.settings)
    run = Pipeline(topology.settings, wiring, tmp_path / "run", extra_args=pipeline_args(), env=topology.env,
                   bridges=topology.bridges)
    yield run
    run.stop()
    InfluxClient(topology.settings).drop_database(wiring.database)


def executing_workers(settings: Settings, pipeline: Pipeline, timeout_s: float = 60) -> list[str]:
    """The workers that run an executor of the job now (supervising until there is one): the
    worker killed is one whose executor holds tasks and state of the running query."""
    deadline = Deadline(timeout_s)
    while not deadline.expired():
        busy = [w.name for w in spark_cluster(settings) if isinstance(w, SparkWorker) and w.executors()]
        if busy:
            return busy
        pipeline.supervise()
        time.sleep(0.5)
    pytest.fail(f"no Spark worker ran an executor within {timeout_s:.0f} s")


def supervise_for(pipeline: Pipeline, seconds: float, skip: tuple[str, ...] = ()) -> None:
    pause = Deadline(seconds)
    while not pause.expired():
        pipeline.supervise(skip=skip)
        time.sleep(0.5)


def test_pipeline_stays_exactly_once_under_kills_and_a_broker_restart(topology: Topology, pipeline: Pipeline,
                                                                      tmp_path: Path) -> None:
    settings = topology.settings
    kafka = Stack(settings, ["kafka"])
    if any(status.state != "running" for status in kafka.status()):
        cannot_run("the broker was not started by this stack launcher, so the test cannot restart it")
    extra_faults, kills_per_stage, rows = chaos_faults(topology)
    events = write_events(tmp_path / "events.json", rows)
    records = distinct_records(file_rows(events))
    want_pairs = join_oracle(settings, records)
    assert sum(want_pairs.values()) > 1000

    pipeline.start_stages()
    pipeline.wait_bridges()
    simulator = pipeline.replay(events, "--rate", str(RATE))
    seed = int(os.environ.get("CHAOS_SEED", str(time.time_ns() % 1_000_000)))
    rng = random.Random(seed)
    faults = [stage for stage in pipeline.stages for _ in range(kills_per_stage)] + extra_faults
    windowed = next(stage for stage in pipeline.stages if stage in WINDOWED)
    rng.shuffle(faults)
    replay_s = rows * (1 + DENSITY / THINGS) / RATE
    injected: list[str] = []
    started = time.monotonic()
    for index, fault in enumerate(faults):
        # spread the faults over the replay: each at a random point of its own slice
        slot = started + replay_s * (index + rng.random()) / len(faults)
        while time.monotonic() < slot:
            pipeline.supervise()
            time.sleep(0.2)
        at = f"{time.monotonic() - started:5.1f}s"
        if fault == "kafka-restart":
            kafka.down()
            time.sleep(3)
            restart_broker(kafka)
        elif fault == "kafka-node-kill":  # the two others keep every partition writable (min.insync 2)
            fault = f"{fault} {kill_group(kafka, rng)}"
            supervise_for(pipeline, rng.uniform(5, 20))
            restart_broker(kafka)
        elif fault == "spark-worker-kill":  # its executor's tasks re-run on the other worker
            assert topology.spark is not None
            busy = executing_workers(topology.spark.settings, pipeline)
            spare = tuple(c.name for c in spark_cluster(topology.spark.settings) if c.name not in busy)
            fault = f"{fault} {kill_group(topology.spark, rng, spare=spare)} (running an executor)"
            supervise_for(pipeline, rng.uniform(2, 10))
            topology.spark.up()
        elif fault == "windows-stopped":  # a long stop: it catches up with a skewed backlog
            pipeline.kill9(windowed)
            supervise_for(pipeline, AGGREGATE_PAUSE_S, skip=(windowed,))
            pipeline.restart(windowed)
        else:
            pipeline.kill9(fault)
            time.sleep(rng.uniform(0.5, 3))
            pipeline.restart(fault)
        injected.append(f"{at} {fault}")
    print(f"chaos seed {seed}; faults injected (time since replay start, fault): {injected}")
    print(f"restarts by the supervisor and the test: {pipeline.restarts}")

    print("chaos:", assert_exactly_once(settings, pipeline, simulator, events, want_pairs), f"faults {injected}")
