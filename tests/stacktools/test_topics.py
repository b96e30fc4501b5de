"""Topic provisioning against the real broker: declared configs, idempotence, drift reports."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import yaml

from stacktools.stack.settings import Settings
from stacktools.stack.topics import _describe_configs, load_topic_specs, main, provision
from streamkit.kafka_clients import admin_client

pytestmark = pytest.mark.stack


def test_declared_topics_exist_with_declared_configs(stack_settings: Settings) -> None:
    specs = load_topic_specs(stack_settings.topic_partitions)
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
    assert raw.config["cleanup.policy"] == "compact" and raw.partitions >= 4
    assert int(raw.config["min.compaction.lag.ms"]) > 0


def test_provisioning_twice_changes_nothing(stack_settings: Settings) -> None:
    report = provision(stack_settings, load_topic_specs(stack_settings.topic_partitions))
    assert report.created == [] and report.drift == []
    assert len(report.unchanged) == len(load_topic_specs(stack_settings.topic_partitions))


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
    report = provision(stack_settings, load_topic_specs(4, first))
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

    import stacktools.stack.topics as topics
    from streamkit.deadline import TimedOut

    class NeverConfirms:
        def list_topics(self, timeout: float) -> SimpleNamespace:
            return SimpleNamespace(topics={})

        def create_topics(self, new_topics: list, operation_timeout: float) -> dict[str, Future]:
            return {topic.topic: Future() for topic in new_topics}

    monkeypatch.setattr(topics, "admin_client", lambda _settings: NeverConfirms())
    with pytest.raises(TimedOut, match="creating topic t.new within 0 s.*is a node down"):
        provision(Settings.from_sources({}), [topics.TopicSpec("t.new", 1, {})], timeout_s=0.05)
