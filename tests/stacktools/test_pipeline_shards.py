"""A pipeline with sharded bridges: one stage per shard, each on its own prefix and MQTT
session, the simulator publishing under the shards, metrics read as one bridge."""

from __future__ import annotations

from pathlib import Path

import pytest

from stacktools.harness.pipeline import Pipeline
from stacktools.harness.services import sharded_stages
from stacktools.harness.wiring import Wiring
from stacktools.stack.settings import Settings


def wiring() -> Wiring:
    return Wiring(
        "raw",
        "dlq",
        "machines/run-1",
        "bridge-1",
        "joined",
        "aggregates",
        "late",
        "markers",
        "-q",
        "connector",
        "db",
    )


def option(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def test_each_bridge_shard_is_a_stage_on_its_own_prefix_and_session(tmp_path: Path) -> None:
    settings = Settings.from_sources(environ={"STACK_RUN_DIR": str(tmp_path)})
    pipeline = Pipeline(settings, wiring(), tmp_path / "work", bridges=3)
    assert pipeline.stages == (
        "mqtt_bridge",
        "mqtt_bridge@1",
        "mqtt_bridge@2",
        "spark_single_pass",
        "db_connector",
    )
    for stage, shard in (("mqtt_bridge", 0), ("mqtt_bridge@1", 1), ("mqtt_bridge@2", 2)):
        args = pipeline._args(stage)
        assert option(args, "--mqtt-topic-prefix") == f"machines/run-1/{shard}"
        assert option(args, "--mqtt-client-id") == f"bridge-1-{shard}"
        assert option(args, "--raw-topic") == "raw"
    assert len({pipeline._port(stage) for stage in pipeline.stages}) == len(pipeline.stages)


def test_one_bridge_keeps_the_plain_prefix(tmp_path: Path) -> None:
    settings = Settings.from_sources(environ={"STACK_RUN_DIR": str(tmp_path)})
    pipeline = Pipeline(settings, wiring(), tmp_path / "work")
    assert pipeline.stages == ("mqtt_bridge", "spark_single_pass", "db_connector")
    assert option(pipeline._args("mqtt_bridge"), "--mqtt-topic-prefix") == "machines/run-1"
    with pytest.raises(ValueError, match="at least 1"):
        sharded_stages(pipeline.stages, 0)
