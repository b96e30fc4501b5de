"""Running the real services as processes and reading back what they wrote.

Used by the stack tests, the benchmarks and the demo, so that all three exercise the services
exactly as a user runs them (``python -m <service>``), never an in-process shortcut.
"""
from __future__ import annotations

import collections
import dataclasses
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from streamkit.access import TOPIC_RIGHTS
from streamkit.config import Settings
from streamkit.kafka_clients import client_config
from streamkit.events import parse_row
from streamkit.topics import TopicSpec, load_topic_specs, provision

REPO = Path(__file__).resolve().parents[1]
RETRY_CODES = {KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError.LEADER_NOT_AVAILABLE,
               KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._ALL_BROKERS_DOWN}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclasses.dataclass
class Lane:
    """A private set of topics and an MQTT prefix, so tests never see each other's data."""

    settings: Settings
    raw_topic: str
    dlq_topic: str
    prefix: str
    client_id: str


def private_topic(settings: Settings, role: str, partitions: int = 2, *, compact: bool = False,
                  admin_only: bool = False) -> str:
    """A fresh topic per test (uuid name), so tests never see each other's records, with the
    rights of the pipeline topic of that role (streamkit.access); ``admin_only``: no service
    may use it, and ``role`` only names it (checks of the servers themselves)."""
    if not admin_only and role not in TOPIC_RIGHTS:
        raise ValueError(f"unknown topic role {role!r}: one of {', '.join(TOPIC_RIGHTS)}")
    name = f"test.{role}.{uuid.uuid4().hex[:10]}"
    config = {"cleanup.policy": "compact", "min.compaction.lag.ms": "0"} if compact else {"cleanup.policy": "delete"}
    provision(settings, [TopicSpec(name, partitions, config, role="" if admin_only else role)])
    return name


def new_lane(settings: Settings) -> Lane:
    tag = uuid.uuid4().hex[:10]
    declared = {s.name: s for s in load_topic_specs(settings.topic_partitions)}
    specs = [dataclasses.replace(declared["machinedata.raw"], name=f"test.raw.{tag}"),
             dataclasses.replace(declared["machinedata.dlq"], name=f"test.dlq.{tag}")]
    provision(settings, specs)
    return Lane(settings, specs[0].name, specs[1].name, f"{settings.mqtt_topic_prefix}/test-{tag}", f"bridge-{tag}")


class Service:
    """A service started as `python -m <module>` in its own process group; kill -9 takes the
    whole group (for a Spark driver: its JVM and Python workers too), as a crash of the host
    would, so a restart never overlaps with leftovers of the killed run."""

    def __init__(self, module: str, args: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.module, self.args, self.log, self.env = module, args, log, env or {}
        self.process: subprocess.Popen | None = None

    def start(self) -> "Service":
        with self.log.open("ab") as handle:
            self.process = subprocess.Popen([sys.executable, "-m", self.module, *self.args], cwd=REPO,
                                            stdout=handle, stderr=subprocess.STDOUT, start_new_session=True,
                                            env={**os.environ, **self.env})
        return self

    def kill9(self) -> None:
        assert self.process is not None
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(10)
        deadline = time.monotonic() + 30
        while _group_alive(self.process.pid) and time.monotonic() < deadline:
            time.sleep(0.1)

    def terminate(self, timeout_s: float = 30) -> int:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout_s)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


def bridge(lane: Lane, log: Path, *extra: str) -> Service:
    return Service("mqtt_bridge", ["--raw-topic", lane.raw_topic, "--dlq-topic", lane.dlq_topic,
                                   "--mqtt-topic-prefix", lane.prefix, "--mqtt-client-id", lane.client_id,
                                   "--metrics-port", str(free_port()), *extra], log)


def simulator(lane: Lane, events: Path, log: Path, *extra: str) -> Service:
    return Service("simulator", ["--input", str(events), "--mqtt-topic-prefix", lane.prefix, "--no-progress",
                                 "--metrics-port", str(free_port()), *extra], log)


def read_topic(settings: Settings, topic: str, isolation: str = "read_committed", timeout_s: float = 60) -> list[Message]:
    """Every record up to the *high watermark* of each partition at call time.

    Not up to the last message offset (a transactional topic ends with a control record) and
    not up to the last stable offset (an open transaction elsewhere hides committed records
    behind it): position >= high watermark is the only end that is certain.
    """
    base = {**client_config(settings, "read-to-end"), "group.id": f"read-{uuid.uuid4().hex}",
            "enable.auto.commit": False, "enable.partition.eof": True}
    ends = high_watermarks(settings, base, topic)
    pending = {p for p, end in ends.items() if end > 0}
    consumer = Consumer({**base, "isolation.level": isolation})
    consumer.assign([TopicPartition(topic, p, 0) for p in pending])
    messages: list[Message] = []
    deadline = time.monotonic() + timeout_s
    while pending and time.monotonic() < deadline:
        for message in consumer.consume(5000, 0.3):
            if message.error() is None:
                messages.append(message)
        for position in consumer.position([TopicPartition(topic, p) for p in list(pending)]):
            if position.offset >= ends[position.partition]:
                pending.discard(position.partition)
    consumer.close()
    assert not pending, f"could not read {topic} to its end (partitions {pending})"
    return messages


def high_watermarks(settings: Settings, base: dict, topic: str, attempts: int = 5) -> dict[int, int]:
    """End offsets (read_uncommitted); retried because a broker stalled by a loaded machine
    answers with transient errors (seen: multi-second controller stalls on the shared 2 cores)."""
    for attempt in range(attempts):
        probe = Consumer({**base, "isolation.level": "read_uncommitted"})
        try:
            partitions = probe.list_topics(topic, timeout=30).topics[topic].partitions
            return {p: probe.get_watermark_offsets(TopicPartition(topic, p), timeout=30, cached=False)[1]
                    for p in partitions}
        except KafkaException as exc:
            if attempt == attempts - 1 or not exc.args[0].retriable() and exc.args[0].code() not in RETRY_CODES:
                raise
            time.sleep(1 + attempt)
        finally:
            probe.close()
    raise AssertionError("unreachable")


def expected_records(events: Path) -> dict[bytes, float]:
    expected = {}
    with events.open("rb") as handle:
        for line in handle:
            if line.strip():
                row = parse_row(line)
                for quantity, value in row.quantities.items():
                    expected[f"{row.thing}|{quantity}|{row.timestamp_ms}".encode()] = value
    return expected


def wait_for_count(settings: Settings, topic: str, count: int, timeout_s: float) -> int:
    """Poll end offsets until the topic holds at least `count` records."""
    consumer = Consumer({**client_config(settings, "count"), "group.id": f"count-{uuid.uuid4().hex}"})
    partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
    deadline = time.monotonic() + timeout_s
    total = 0
    while time.monotonic() < deadline:
        total = sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions)
        if total >= count:
            break
        time.sleep(0.5)
    consumer.close()
    return total


def wait_for_log(path: Path, text: str, timeout_s: float = 60, service: "Service | None" = None) -> None:
    """Until a service's log holds a line with `text` (e.g. the bridge's "bridge running",
    logged once its subscription is acknowledged)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        if service is not None and not service.alive():
            raise AssertionError(f"{service.module} exited before logging {text!r}: {path.read_text()[-2000:]}")
        time.sleep(0.1)
    raise AssertionError(f"{text!r} not in {path} after {timeout_s}s")


def wait_for_keys(settings: Settings, topic: str, keys: set[bytes], timeout_s: float) -> set[bytes]:
    """Until every key is in the topic (end offsets alone mislead when re-sends are expected)."""
    deadline = time.monotonic() + timeout_s
    seen: set[bytes] = set()
    while time.monotonic() < deadline:
        seen = {m.key() for m in read_topic(settings, topic)}
        if keys <= seen:
            break
        time.sleep(2)
    return seen


def group_by_key(messages: list) -> dict[bytes, list[bytes]]:
    grouped: dict[bytes, list[bytes]] = collections.defaultdict(list)
    for message in messages:
        grouped[message.key()].append(message.value())
    return grouped


def private_database(settings: Settings) -> str:
    """A fresh InfluxDB database per test (the shared one belongs to the demo)."""
    from streamkit.stack.components import InfluxDB

    name = f"test_{uuid.uuid4().hex[:10]}"
    InfluxDB(settings).create_database(name)
    return name


def drop_database(settings: Settings, name: str) -> None:
    from streamkit.stack.components import InfluxDB

    InfluxDB(settings).query(f'DROP DATABASE "{name}"')


def influx_rows(settings: Settings, database: str, statement: str) -> list[dict]:
    """Rows of one InfluxQL SELECT as dicts (tags of GROUP BY * included), times in ns."""
    from streamkit.stack.components import InfluxDB

    status, body = InfluxDB(settings).query(statement, database=database, epoch="ns")
    assert status == 200, body
    result = body["results"][0]
    assert "error" not in result, result["error"]
    rows = []
    for series in result.get("series", []):
        for values in series["values"]:
            rows.append({**series.get("tags", {}), **dict(zip(series["columns"], values))})
    return rows


def connector(settings: Settings, log: Path, database: str, group: str, topics: dict[str, str], *extra: str) -> Service:
    """The DB connector on private topics ({kind: topic}), database and consumer group."""
    args = ["--topics", ",".join(topics), "--influx-database", database, "--group-id", group,
            "--instance-id", group, "--metrics-port", str(free_port())]
    for kind, topic in topics.items():
        args += [f"--{kind}-topic", topic]  # kinds are named like the topic settings
    return Service("db_connector", [*args, *extra], log)
