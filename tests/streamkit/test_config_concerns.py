"""Each service's settings hold only the concerns it uses; the full model still holds them all."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from alert_forwarder.config import ForwarderSettings
from db_connector.config import ConnectorSettings
from mqtt_bridge.config import BridgeSettings
from simulator.config import SimulatorSettings
from spark_jobs.config import AggregateSettings, JoinSettings, SinglePassSettings, SparkJobSettings
from stacktools.harness.services import SERVICES
from stacktools.stack.settings import Settings, StackSettings
from streamkit.config import (
    AlertmanagerSettings,
    InfluxSettings,
    KafkaSettings,
    MqttSettings,
    PrometheusSettings,
    ServiceSettings,
)
from streamkit.errors import ConfigError
from streamkit.fields import identity_fields

CONCERNS = (
    KafkaSettings,
    MqttSettings,
    InfluxSettings,
    PrometheusSettings,
    AlertmanagerSettings,
    StackSettings,
)

#: What each service talks to, and so the only concerns its settings may have.
EXPECTED: dict[type[ServiceSettings], set[type[ServiceSettings]]] = {
    SimulatorSettings: {MqttSettings},
    BridgeSettings: {KafkaSettings, MqttSettings},
    SparkJobSettings: {KafkaSettings},
    JoinSettings: {KafkaSettings},
    AggregateSettings: {KafkaSettings},
    SinglePassSettings: {KafkaSettings},
    ConnectorSettings: {KafkaSettings, InfluxSettings},
    ForwarderSettings: {KafkaSettings, AlertmanagerSettings},
}


def names(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def own_names(concern: type[ServiceSettings]) -> set[str]:
    """The fields a concern adds to the concerns it builds on (the launcher's on
    Prometheus's and the Alertmanager's)."""
    inherited = [
        names(base)
        for base in concern.__mro__[1:]
        if dataclasses.is_dataclass(base) and issubclass(base, ServiceSettings)
    ]
    return names(concern) - set().union(*inherited)


def test_concerns_do_not_overlap_and_settings_has_them_all() -> None:
    seen: set[str] = set()
    for concern in CONCERNS:
        assert own_names(concern), concern.__name__
        assert not own_names(concern) & seen, (
            f"{concern.__name__} repeats a field of another concern"
        )
        seen |= own_names(concern)
    assert names(Settings) == names(ServiceSettings) | seen
    assert Settings.systems() == ("kafka", "mqtt", "influx")


@pytest.mark.parametrize("cls", list(EXPECTED), ids=lambda cls: cls.__name__)
def test_each_service_has_only_the_concerns_it_uses(cls: type[ServiceSettings]) -> None:
    for concern in CONCERNS:
        has = concern in EXPECTED[cls]
        assert issubclass(cls, concern) is has, (
            f"{cls.__name__} {'lacks' if has else 'has'} {concern.__name__}"
        )
        if has:
            assert own_names(concern) <= names(cls)
        else:
            assert not own_names(concern) & names(cls), (
                f"{cls.__name__} has fields of {concern.__name__}"
            )


def test_the_issue_s_examples() -> None:
    bridge = names(BridgeSettings)
    assert not {n for n in bridge if n.startswith("influx_")}
    assert "prometheus_port" not in bridge and "kafka_controller_port" not in bridge
    assert not {
        n for n in names(SimulatorSettings) if n.startswith("kafka_") or n.endswith("_topic")
    }
    assert not {n for n in names(ConnectorSettings) if n.startswith("mqtt_")}
    assert not hasattr(SimulatorSettings.from_sources(environ={}), "bootstrap_servers")
    assert not hasattr(BridgeSettings.from_sources(environ={}), "influx_base_url")


def test_services_keep_their_own_users_and_metrics_ports() -> None:
    users = {
        cls: {
            system: {f.name: f.default for f in dataclasses.fields(cls)}[identity_fields(system)[0]]
            for system in cls.systems()
        }
        for cls in EXPECTED
    }
    assert users[SimulatorSettings] == {"mqtt": "machine"}
    assert users[BridgeSettings] == {"kafka": "bridge", "mqtt": "bridge"}
    assert users[JoinSettings] == {"kafka": "spark-join"}
    assert users[AggregateSettings] == {"kafka": "spark-aggregate"}
    assert users[SinglePassSettings] == {"kafka": "spark-single-pass"}
    assert users[ConnectorSettings] == {"kafka": "connector", "influx": "connector"}
    assert users[ForwarderSettings] == {"kafka": "alerts"}
    assert {spec.name: spec.metrics_port for spec in SERVICES.values()} == {
        "simulator": 9201,
        "mqtt_bridge": 9202,
        "spark_join": 9203,
        "spark_aggregate": 9204,
        "db_connector": 9205,
        "spark_single_pass": 9206,
        "alert_forwarder": 9207,
    }


def test_each_service_parses_its_own_cli_and_environment(tmp_path: Path) -> None:
    environ = {"STACK_RUN_DIR": str(tmp_path), "LOG_LEVEL": "DEBUG"}
    sim, _ = SimulatorSettings.parse(
        ["--mqtt-port", "2883", "--mqtt-topic-prefix", "p", "--rate", "3"]
    )
    assert (sim.mqtt_port, sim.mqtt_topic_prefix, sim.rate) == (2883, "p", 3.0)
    bridge = BridgeSettings.from_sources(
        environ={**environ, "KAFKA_PORT": "19092", "MQTT_HOST": "broker"},
        cli={"raw_topic": "r", "max_unacked": 5},
    )
    assert (
        bridge.bootstrap_servers,
        bridge.mqtt_host,
        bridge.raw_topic,
        bridge.max_unacked,
        bridge.log_level,
    ) == ("127.0.0.1:19092", "broker", "r", 5, "DEBUG")
    join, _ = JoinSettings.parse(
        ["--run-dir", str(tmp_path), "--kafka-bootstrap-servers", "k:1", "--pairs", "a:b"]
    )
    assert (join.bootstrap_servers, join.pairs, join.run_dir) == ("k:1", "a:b", tmp_path)
    connector = ConnectorSettings.from_sources(
        environ={**environ, "INFLUX_PORT": "18086", "INFLUX_DATABASE": "d"}
    )
    assert (connector.influx_base_url, connector.influx_database) == (
        "https://127.0.0.1:18086",
        "d",
    )


def test_a_flag_of_a_concern_a_service_lacks_is_refused() -> None:
    with pytest.raises(SystemExit):
        BridgeSettings.parse(["--influx-database", "x"])
    with pytest.raises(SystemExit):
        SimulatorSettings.parse(["--raw-topic", "x"])


def test_a_child_ignores_the_launcher_s_variables_of_other_concerns(tmp_path: Path) -> None:
    """The launcher passes the full model's environment to every service it starts."""
    (tmp_path / "credentials.env").write_text("MQTT_MACHINE_PASSWORD=m\nKAFKA_BRIDGE_PASSWORD=b\n")
    full = Settings.from_sources(
        environ={"STACK_RUN_DIR": str(tmp_path)},
        cli={
            "kafka_port": 19092,
            "mqtt_port": 2883,
            "influx_port": 1,
            "prometheus_port": 2,
            "topic_partitions": 7,
            "raw_topic": "raw.x",
        },
    )
    environment = full.as_environment()
    assert {"INFLUX_PORT", "PROMETHEUS_PORT", "TOPIC_PARTITIONS"} <= set(environment)
    simulator = SimulatorSettings.from_sources(environ=environment)
    assert (simulator.mqtt_port, simulator.mqtt_username, simulator.mqtt_password.reveal()) == (
        2883,
        "machine",
        "m",
    )
    bridge = BridgeSettings.from_sources(environ=environment)
    assert (bridge.bootstrap_servers, bridge.raw_topic, bridge.kafka_password.reveal()) == (
        "127.0.0.1:19092",
        "raw.x",
        "b",
    )
    for child in (simulator, bridge):  # what the two share, the child took over unchanged
        shared = set(child.as_environment()) & set(environment)
        assert shared >= {"STACK_RUN_DIR", "METRICS_PORT", "MQTT_PORT"}
        assert {k: child.as_environment()[k] for k in shared} == {k: environment[k] for k in shared}


def test_identity_helpers_touch_only_the_concerns_a_class_has(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MQTT_OTHER_PASSWORD", "o")
    simulator = SimulatorSettings.from_sources(environ={"STACK_RUN_DIR": str(tmp_path)})
    assert SimulatorSettings.systems() == ("mqtt",)
    assert not {"MQTT_USERNAME", "MQTT_PASSWORD"} & set(simulator.as_environment())
    assert (
        simulator.acting_as("mqtt", "other").mqtt_username,
        simulator.acting_as("mqtt", "other").mqtt_password.reveal(),
    ) == ("other", "o")
    # generic: reads no field of a missing concern
    assert simulator.credential("kafka", "admin").reveal() == ""
    with pytest.raises(ValueError, match="no kafka login"):
        simulator.acting_as("kafka", "admin")


def test_a_choice_setting_refuses_anything_else_at_start(tmp_path: Path) -> None:
    """SPARK_SINK is a Literal: a typo stops the job when its settings load (environment or
    flag), not minutes later when the query starts."""
    environ = {"STACK_RUN_DIR": str(tmp_path)}
    assert SparkJobSettings.from_sources({**environ, "SPARK_SINK": "executors"}).sink == "executors"
    with pytest.raises(ConfigError, match="SPARK_SINK: 'executor' is not one of driver, executors"):
        SparkJobSettings.from_sources({**environ, "SPARK_SINK": "executor"})
    with pytest.raises(SystemExit):  # argparse: invalid choice
        SparkJobSettings.parse(["--sink", "executor"])
