"""Topic provisioning against the real broker: declared configs, idempotence, drift reports."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Consumer, Producer, TopicPartition

from stacktools.stack.servers.kafka import RETENTION_CHECK_MS
from stacktools.stack.settings import Settings
from stacktools.stack.topics import (
    TopicSpec,
    _describe_configs,
    load_topic_specs,
    main,
    provision,
    retention_config,
)
from streamkit.kafka_clients import admin_client, client_config

pytestmark = pytest.mark.stack


def test_declared_topics_exist_with_declared_configs(stack_settings: Settings) -> None:
    specs = load_topic_specs(stack_settings)
    names = {s.name for s in specs}
    assert {
        "machinedata.raw",
        "machinedata.joined",
        "machinedata.aggregates",
        "machinedata.late",
        "machinedata.dlq",
        "machinedata.commit-markers",
    } <= names
    metadata = admin_client(stack_settings).list_topics(timeout=10).topics
    actual = _describe_configs(admin_client(stack_settings), sorted(names))
    for spec in specs:
        assert len(metadata[spec.name].partitions) == spec.partitions, spec.name
        for key, value in spec.config.items():
            assert actual[spec.name][key] == value, (spec.name, key)
    raw = next(s for s in specs if s.name == "machinedata.raw")
    assert raw.config["cleanup.policy"] == "compact,delete" and raw.partitions >= 4
    assert raw.config["retention.ms"] == str(7 * 24 * 3600 * 1000)  # RAW_RETENTION's default
    assert int(raw.config["min.compaction.lag.ms"]) > 0


def test_raw_retention_off_keeps_the_raw_topic_compacted_alone() -> None:
    for value, expected in (("off", {"cleanup.policy": "compact"}), ("2d", None)):
        settings = Settings.from_sources({"RAW_RETENTION": value})
        raw = next(s for s in load_topic_specs(settings) if s.role == "raw")
        if expected is None:
            assert raw.config["cleanup.policy"] == "compact,delete"
            assert raw.config["retention.ms"] == str(2 * 24 * 3600 * 1000)
        else:
            assert expected.items() <= raw.config.items() and "retention.ms" not in raw.config


def test_the_broker_deletes_raw_records_older_than_the_retention(stack_settings: Settings) -> None:
    """What bounds the raw topic's disk: a record written longer than the retention ago is
    deleted although compaction alone would keep it (its key is never written again)."""
    name = f"test.raw-retention.{uuid.uuid4().hex[:8]}"
    raw = next(s for s in load_topic_specs(stack_settings) if s.role == "raw")
    config = raw.config | retention_config(timedelta(minutes=1)) | {"segment.ms": "100"}
    provision(stack_settings, [TopicSpec(name, 1, config, role="raw")])
    producer = Producer(client_config(stack_settings, "retention-test"))
    written_ms = int(time.time() * 1000) - 3_600_000  # as if written an hour ago
    for n in range(10):
        producer.produce(name, key=f"k{n}".encode(), value=b"v", timestamp=written_ms)
    producer.flush(30)
    time.sleep(0.2)  # the next record rolls the segment (its first record is an hour old)
    producer.produce(name, key=b"now", value=b"v")
    producer.flush(30)
    consumer = Consumer(
        client_config(stack_settings, "retention-test") | {"group.id": f"retention-{name}"}
    )
    try:
        # within two of the node's retention checks
        deadline = time.monotonic() + 2 * RETENTION_CHECK_MS / 1000 + 10
        while True:
            low, high = consumer.get_watermark_offsets(TopicPartition(name, 0), timeout=10)
            if low == 10 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert (low, high) == (10, 11), "the hour-old records were not deleted"
    finally:
        consumer.close()


def test_provisioning_twice_changes_nothing(stack_settings: Settings) -> None:
    report = provision(stack_settings, load_topic_specs(stack_settings))
    assert report.created == [] and report.drift == []
    assert len(report.unchanged) == len(load_topic_specs(stack_settings))


def _declare(tmp_path: Path, name: str, partitions: int, config: dict[str, str]) -> Path:
    path = tmp_path / "topics.yaml"
    path.write_text(
        yaml.safe_dump({"topics": {name: {"partitions": partitions, "config": config}}})
    )
    return path


def test_drift_is_reported_and_config_drift_can_be_fixed(
    stack_settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = f"test.drift.{uuid.uuid4().hex[:8]}"
    first = _declare(tmp_path, name, 2, {"cleanup.policy": "compact", "retention.ms": "1000000"})
    report = provision(stack_settings, load_topic_specs(stack_settings, first))
    assert report.created == [name]
    changed = _declare(tmp_path, name, 3, {"cleanup.policy": "compact", "retention.ms": "2000000"})
    cli = [
        "--file",
        str(changed),
        "--kafka-bootstrap-servers",
        stack_settings.bootstrap_servers,
        "--check",
    ]
    assert main(cli) == 3
    out = capsys.readouterr().out
    assert f"DRIFT     {name}: partitions declared 3, actual 2" in out
    assert f"DRIFT     {name}: retention.ms declared '2000000', actual '1000000'" in out
    assert main([*cli, "--fix-config"]) == 3  # partitions are never changed automatically
    out = capsys.readouterr().out
    assert f"fixed     {name}: retention.ms=2000000" in out and "retention.ms declared" not in out
    actual = _describe_configs(admin_client(stack_settings), [name])[name]
    assert actual["retention.ms"] == "2000000"


def test_a_creation_kafka_never_confirms_says_what_to_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With a node down, the admin client may send the creation to that node and wait out the
    timeout (measured on the three-node stack): the error names the likely cause."""
    from concurrent.futures import Future
    from types import SimpleNamespace

    from confluent_kafka import KafkaException

    import stacktools.stack.kafka_access as kafka_access
    import stacktools.stack.topics as topics

    class NeverConfirms:
        def list_topics(self, timeout: float) -> SimpleNamespace:
            return SimpleNamespace(topics={})

        def create_topics(self, new_topics: list, operation_timeout: float) -> dict[str, Future]:
            return {topic.topic: Future() for topic in new_topics}

    monkeypatch.setattr(topics, "admin_client", lambda _settings: NeverConfirms())
    monkeypatch.setattr(kafka_access, "ANSWER_MARGIN_S", 0.0)
    with pytest.raises(KafkaException, match="0 s to creating topic t.new; .*is a node down"):
        provision(Settings.from_sources({}), [topics.TopicSpec("t.new", 1, {})], timeout_s=0.05)
