"""End-to-end exactly-once when the clients' own calls fail: every stage runs with
``tests.support.faults`` installed (produce, deliveries, consume/poll, offset commits,
send_offsets_to_transaction, begin/commit/abort of transactions, the InfluxDB write fail at
random with retriable, non-retriable, abortable, fatal and unknown-outcome errors), and mid
replay the broker and then InfluxDB are paused with SIGSTOP for longer than the clients'
timeouts. Every stage is supervised. Meanwhile undecodable records are written into the late
topic, so the connector also takes its transactional path (dead letters + offsets in one
transaction) under the faults. At the end InfluxDB and the committed topics must equal the
oracles exactly, every poison record must be dead-lettered exactly once, and every kind of
fault must have been injected.

Knobs: CLIENT_FAULT_SCALE (1.0: multiplies every fault rate), CLIENT_FAULT_ROWS (6000),
CLIENT_FAULT_SEED (random; printed), CLIENT_FAULT_KAFKA_PAUSE_S (50),
CLIENT_FAULT_INFLUX_PAUSE_S (20).
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from simulator.generate import generate
from stacktools.harness.pipeline import Pipeline
from stacktools.harness.wiring import Wiring
from stacktools.stack import Stack
from stacktools.stack.influx import InfluxClient
from stacktools.stack.settings import Settings
from streamkit.deadline import Deadline
from streamkit.kafka_clients import idempotent_producer
from streamkit.kafka_io import read_to_end
from streamkit.wire import AvroCodec
from tests.oracles.pipeline import expected_outputs
from tests.oracles.rows import file_rows, measurements
from tests.support.exactness import PIPELINE, assert_exactly_once, pipeline_args
from tests.support.influx_checks import POISON_KEY
from tests.support.require import cannot_run

pytestmark = [pytest.mark.stack, pytest.mark.spark, pytest.mark.chaos]
SCALE = float(os.environ.get("CLIENT_FAULT_SCALE", "1.0"))
ROWS = int(os.environ.get("CLIENT_FAULT_ROWS", "6000"))
KAFKA_PAUSE_S = float(os.environ.get("CLIENT_FAULT_KAFKA_PAUSE_S", "50"))
INFLUX_PAUSE_S = float(os.environ.get("CLIENT_FAULT_INFLUX_PAUSE_S", "20"))
RATE = 100  # rows/s
FAULT_SITE = Path(__file__).resolve().parents[1] / "support" / "faults" / "site"
KINDS = {
    "retriable",
    "non_retriable",
    "abortable",
    "fatal",
    "unknown_outcome",
    "buffer_full",
    "connection",
    "server",
}


def paused(settings: Settings, component: str, seconds: float, pipeline: Pipeline) -> None:
    """SIGSTOP the stack component's process for ``seconds`` (supervising meanwhile), then
    SIGCONT."""
    (status,) = Stack(settings, [component]).status()
    if status.state != "running" or status.pid is None:
        cannot_run(
            f"{component} was not started by this stack launcher, so the test cannot pause it"
        )
    os.kill(status.pid, signal.SIGSTOP)
    try:
        pause = Deadline(seconds)
        while not pause.expired():
            pipeline.supervise()
            time.sleep(0.5)
    finally:
        os.kill(status.pid, signal.SIGCONT)


class Poisoner:
    """Writes undecodable records (key POISON_KEY) into a topic the connector reads."""

    def __init__(self, settings: Settings, topic: str) -> None:
        self.producer = idempotent_producer(settings, "client-faults-poison")
        self.topic = topic
        self.values: list[bytes] = []

    def write_for(self, seconds: float, pipeline: Pipeline) -> None:
        """One poison record a second for ``seconds``, supervising meanwhile."""
        deadline = Deadline(seconds)
        while not deadline.expired():
            value = b"poison-%04d" % len(self.values)
            with pytest.raises((EOFError, ValueError)):  # it must really be undecodable
                AvroCodec("late").decode(value)
            self.producer.produce(self.topic, value, POISON_KEY)
            self.values.append(value)
            pipeline.supervise()
            time.sleep(1)
        assert self.producer.flush(30) == 0


def connector_dead_letters(settings: Settings, dlq_topic: str, source_topic: str) -> Counter:
    """The committed dead letters the connector made of records of ``source_topic``."""
    letters: Counter = Counter()
    for message in read_to_end(settings, dlq_topic):
        headers = dict(message.headers() or [])
        if headers.get("source") == source_topic.encode():
            letters[(message.key(), message.value(), headers.get("reason"))] += 1
    return letters


def injected_faults(pipeline: Pipeline) -> Counter:
    """(call, kind) of every fault the stages' processes logged."""
    seen: Counter = Counter()
    for name in pipeline.stages:
        for line in pipeline.log(name).read_text(errors="replace").splitlines():
            if line.startswith('{"message": "fault injected"'):
                fault = json.loads(line)
                seen[(fault["call"], fault["kind"])] += 1
    return seen


@pytest.fixture
def pipeline(stack_settings: Settings, tmp_path: Path):
    seed = int(os.environ.get("CLIENT_FAULT_SEED", str(time.time_ns() % 1_000_000)))
    print(f"client fault seed {seed}, scale {SCALE}")
    wiring = Wiring.private(stack_settings)
    run = Pipeline(
        stack_settings,
        wiring,
        tmp_path / "run",
        extra_args=pipeline_args(),
        env={"PYTHONPATH": str(FAULT_SITE), "CLIENT_FAULTS": f"{seed},{SCALE}"},
    )
    yield run
    run.stop()
    InfluxClient(stack_settings).drop_database(wiring.database)


def test_pipeline_stays_exactly_once_when_client_calls_fail_and_servers_pause(
    stack_settings: Settings, pipeline: Pipeline, tmp_path: Path
) -> None:
    settings = stack_settings
    events = tmp_path / "events.json"
    events.write_text("".join(json.dumps(row) + "\n" for row in generate(ROWS, 10, seed=5)))
    # a round worth judging
    assert len(expected_outputs(PIPELINE, measurements(file_rows(events))).joined) > 500

    pipeline.start_stages()
    pipeline.wait_ready()
    simulator = pipeline.replay(events, "--rate", str(RATE))
    replay_s = ROWS / RATE
    poison = Poisoner(settings, pipeline.wiring.late)
    poison.write_for(replay_s / 4, pipeline)
    paused(settings, "kafka", KAFKA_PAUSE_S, pipeline)
    poison.write_for(replay_s / 4, pipeline)
    paused(settings, "influxdb", INFLUX_PAUSE_S, pipeline)
    summary = assert_exactly_once(
        settings, pipeline, simulator, events, skip_keys=frozenset({POISON_KEY})
    )
    letters = connector_dead_letters(settings, pipeline.wiring.dlq, pipeline.wiring.late)
    assert letters == Counter(
        {(POISON_KEY, value, b"undecodable"): 1 for value in poison.values}
    ), letters

    seen = injected_faults(pipeline)
    kinds = {kind for _, kind in seen}
    print(
        f"client faults: {summary}; injected {sum(seen.values())}: {dict(seen)}; restarts "
        f"{pipeline.restarts}"
    )
    assert {"retriable", "non_retriable", "abortable", "unknown_outcome"} <= kinds, seen
    assert kinds <= KINDS
    assert {call for call, _ in seen} >= {
        "produce_batch",
        "commit_transaction",
        "send_offsets_to_transaction",
        "commit",
        "influx_write",
    }, seen
