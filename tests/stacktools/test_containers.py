"""The server checks of test_local_stack, against containers started with testcontainers: the
images docker-compose.yml names (built here as stand-ins, scripts/container-images.sh), with the
compose file's own entry points and settings, so auth and TLS are on (SCRAM for Kafka,
passwords for Mosquitto and InfluxDB, every listener TLS with the certs job's files) exactly as
users run it. testcontainers talks to podman's Docker API
(stacktools.compose.engine) where there is no Docker engine. Never skipped where containers
can run: only on a machine with neither podman nor Docker, outside CI."""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from stacktools.compose import engine as container_engine
from stacktools.compose.credentials import new_cluster_id, new_password
from stacktools.stack import certs
from stacktools.stack.influx import InfluxClient
from stacktools.stack.render import COMPOSE_SERVERS, ComposeCluster, render
from stacktools.stack.settings import Settings
from streamkit.deadline import wait_until
from streamkit.kafka_clients import admin_client, client_config
from streamkit.paths import REPO_ROOT
from streamkit.secret import Secret
from tests.support import server_checks as checks
from tests.support.compose import build_images
from tests.support.ports import free_ports
from tests.support.require import cannot_run

pytestmark = pytest.mark.containers

COMPOSE = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())["services"]
IMAGES = {name: COMPOSE[name]["image"] for name in ("kafka", "mosquitto", "influxdb", "prometheus")}


def _engine_env() -> dict[str, str]:
    """DOCKER_HOST of a Docker engine that answers, else of podman's API started now."""
    import docker

    try:
        # mypy resolves the name to the repository's docker/ folder, not the docker package
        docker.from_env(timeout=5).ping()  # type: ignore[attr-defined]
        return {"TESTCONTAINERS_RYUK_DISABLED": "true"}
    except Exception:  # noqa: BLE001 - no Docker engine: podman's API instead
        pass
    if not shutil.which("podman"):
        cannot_run(
            "neither a Docker engine nor podman (scripts/setup-containers.sh installs podman)"
        )
    container_engine.start()
    return container_engine.engine_env()


@pytest.fixture(scope="module")
def container_settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    build_images()
    saved = dict(os.environ)
    os.environ.update(_engine_env())
    from testcontainers.core.container import DockerContainer

    work = tmp_path_factory.mktemp("containers")
    passwords = {
        name: new_password()
        for name in (
            "KAFKA_ADMIN_PASSWORD",
            "KAFKA_CONTROLLER_PASSWORD",
            "MQTT_ADMIN_PASSWORD",
            "MQTT_MACHINE_PASSWORD",
            "MQTT_BRIDGE_PASSWORD",
            "INFLUX_ADMIN_PASSWORD",
        )
    }
    kafka_port, mqtt_port, influx_port, prometheus_port = free_ports(4)
    # what compose's certs job publishes into its `tls` volume, here a directory
    tls = certs.publish(
        certs.ensure(Settings.from_sources(environ={"STACK_RUN_DIR": str(work / "ca")})),
        work / "tls",
    )
    tls_dir = str(tls.ca.parent)
    # what compose's config job renders into each server's volume, here a directory each
    config = work / "config"
    with pytest.MonkeyPatch.context() as patch:
        for name, password in passwords.items():
            patch.setenv(name, password)
        environ = {
            "STACK_RUN_DIR": str(work / "render"),
            "TLS": "true",
            "KAFKA_PORT": str(kafka_port),
        }
        cluster = ComposeCluster(new_cluster_id(), (kafka_port,))
        render(Settings.from_sources(environ={**passwords, **environ}), config, cluster)

    def server(name: str, *scripts: str) -> DockerContainer:
        """The image compose names, its entry point, its configuration, the `tls` volume."""
        container = DockerContainer(IMAGES[name]).with_volume_mapping(
            str(config / name), str(COMPOSE_SERVERS[name].conf_dir), "ro"
        )
        for script in scripts:
            container.with_volume_mapping(
                str(REPO_ROOT / "docker" / script), f"/docker/{script}", "ro"
            )
        if "entrypoint" in COMPOSE[name]:
            container.with_kwargs(entrypoint=COMPOSE[name]["entrypoint"])
        return container.with_volume_mapping(tls_dir, "/tls", "ro")

    kafka = server("kafka", "kafka").with_bind_ports(9092, kafka_port)
    kafka.with_kwargs(hostname="kafka", entrypoint=COMPOSE["kafka"]["entrypoint"])
    mosquitto = server("mosquitto").with_bind_ports(8883, mqtt_port)
    influx = server("influxdb", "influxdb").with_bind_ports(8086, influx_port)
    prometheus = server("prometheus").with_bind_ports(9090, prometheus_port)
    started = []
    try:
        for container in (kafka, mosquitto, influx, prometheus):
            container.start()
            started.append(container)
        settings = Settings.from_sources(
            environ={
                **passwords,
                "STACK_RUN_DIR": str(work),
                "KAFKA_PORT": str(kafka_port),
                "MQTT_PORT": str(mqtt_port),
                "INFLUX_PORT": str(influx_port),
                "PROMETHEUS_PORT": str(prometheus_port),
                "INFLUX_DATABASE": "machinedata",
                "TLS": "true",
                "TLS_CA_FILE": str(tls.ca),
            }
        )
        wait_until(lambda: _answers(settings), 180, "the containers answering", interval_s=1)
        # the database `provision` would create (the image's entry point creates only the admin)
        InfluxClient(settings).execute(f'CREATE DATABASE "{settings.influx_database}"', "database")
        yield settings
    finally:
        for container in reversed(started):
            container.stop()
        os.environ.clear()
        os.environ.update(saved)


def _answers(settings: Settings) -> bool:
    try:
        admin_client(settings).list_topics(timeout=3)
        checks.prometheus_targets(settings)
        return checks.influx_query(settings, "SHOW DATABASES")[0] == 200
    except Exception:  # noqa: BLE001 - still starting
        return False


def test_transactions_in_containers(container_settings: Settings) -> None:
    checks.check_transactions(container_settings)


def test_kafka_in_containers_refuses_a_wrong_password(container_settings: Settings) -> None:
    """Refused by the broker's SASL/SCRAM (the client reports an authentication error), where
    the right password (the fixture's) is let in."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient

    errors: list[KafkaError] = []
    wrong = dataclasses.replace(container_settings, kafka_password=Secret("not-the-password"))
    config: dict[str, Any] = {**client_config(wrong, "wrong"), "error_cb": errors.append}
    client = AdminClient(config)
    with pytest.raises(KafkaException) as refused:
        client.list_topics(timeout=10)
    # SCRAM closed the connection
    assert refused.value.args[0].code() == KafkaError._TRANSPORT, refused.value
    client.poll(2)  # serves the error callbacks
    assert any(error.code() == KafkaError._AUTHENTICATION for error in errors), errors


def test_every_server_in_containers_speaks_only_tls(
    container_settings: Settings, tmp_path: Path
) -> None:
    stranger = certs.ensure(Settings.from_sources(environ={"STACK_RUN_DIR": str(tmp_path)}))
    checks.check_tls_only(container_settings, stranger.ca)


def test_mqtt_auth_in_containers(container_settings: Settings) -> None:
    checks.check_mqtt_auth(container_settings)


def test_influxdb_in_containers(container_settings: Settings) -> None:
    checks.check_influx_write_read(container_settings)


def test_prometheus_in_containers(container_settings: Settings) -> None:
    assert {
        t["labels"]["job"]
        for t in checks.prometheus_targets(container_settings)
        if t["health"] == "up"
    } >= {"prometheus"}
