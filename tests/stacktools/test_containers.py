"""The same checks as test_local_stack, against containers (testcontainers), where a Docker
engine answers. Skipped with the reason otherwise: a docker CLI without an engine is common
(this project's CI machines have exactly that)."""
from __future__ import annotations

import dataclasses
import secrets
import subprocess
from collections.abc import Iterator

import pytest

from streamkit.config import Settings
from streamkit.paths import find_program
from tests.support import server_checks as checks
from streamkit.deadline import wait_until

pytestmark = pytest.mark.containers

KAFKA_IMAGE = "confluentinc/cp-kafka:7.9.0"
MOSQUITTO_IMAGE = "eclipse-mosquitto:2.0.20"
INFLUXDB_IMAGE = "influxdb:1.8.10"
PROMETHEUS_IMAGE = "prom/prometheus:v2.53.2"


def docker_engine_problem() -> str | None:
    """None when a Docker engine answers a ping, else why not (decided by the engine, not the CLI)."""
    try:
        import docker

        docker.from_env(timeout=5).ping()
        return None
    except Exception as exc:  # noqa: BLE001 - any failure means no usable engine
        return f"no Docker engine answers a ping ({type(exc).__name__}: {str(exc)[:120]})"


_problem = docker_engine_problem()
if _problem:
    pytest.skip(f"testcontainers path skipped: {_problem}", allow_module_level=True)


@pytest.fixture(scope="module")
def container_settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    from testcontainers.community.influxdb.version1 import InfluxDb1Container
    from testcontainers.community.kafka import KafkaContainer
    from testcontainers.community.mqtt import MosquittoContainer
    from testcontainers.core.container import DockerContainer

    work = tmp_path_factory.mktemp("containers")
    mqtt_password, influx_password = secrets.token_urlsafe(12), secrets.token_urlsafe(12)
    passwd = work / "passwd"
    passwd_tool = find_program("mosquitto_passwd")
    assert passwd_tool, "mosquitto_passwd (Debian mosquitto) is needed to write the password file"
    subprocess.run([str(passwd_tool), "-b", "-c", str(passwd), "machinedata", mqtt_password], check=True)
    passwd.chmod(0o644)
    mosquitto_conf = work / "mosquitto.conf"
    mosquitto_conf.write_text("listener 1883\nallow_anonymous false\npassword_file /mosquitto/config/passwd\n")
    prometheus_conf = work / "prometheus.yml"
    prometheus_conf.write_text("global: {scrape_interval: 5s}\nscrape_configs:\n"
                               "  - job_name: prometheus\n    static_configs: [{targets: ['localhost:9090']}]\n")

    kafka = (KafkaContainer(KAFKA_IMAGE).with_kraft()
             .with_env("KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR", "1")
             .with_env("KAFKA_TRANSACTION_STATE_LOG_MIN_ISR", "1"))
    mosquitto = MosquittoContainer(MOSQUITTO_IMAGE).with_volume_mapping(str(passwd), "/mosquitto/config/passwd")
    influx = (InfluxDb1Container(INFLUXDB_IMAGE)
              .with_env("INFLUXDB_HTTP_AUTH_ENABLED", "true").with_env("INFLUXDB_HTTP_FLUX_ENABLED", "true")
              .with_env("INFLUXDB_ADMIN_USER", "admin").with_env("INFLUXDB_ADMIN_PASSWORD", influx_password)
              .with_env("INFLUXDB_DB", "machinedata"))
    prometheus = (DockerContainer(PROMETHEUS_IMAGE).with_exposed_ports(9090)
                  .with_volume_mapping(str(prometheus_conf), "/etc/prometheus/prometheus.yml"))
    started = []
    try:
        for container, start in ((kafka, kafka.start), (mosquitto, lambda: mosquitto.start(str(mosquitto_conf))),
                                 (influx, influx.start), (prometheus, prometheus.start)):
            start()
            started.append(container)
        base = Settings.from_sources(cli={"run_dir": work})
        settings = dataclasses.replace(
            base,
            # testcontainers' broker has a plaintext listener only: these checks are of the
            # clients against stock images; the stack's own auth is tested in test_access.py
            kafka_bootstrap_servers=kafka.get_bootstrap_server(), kafka_security_protocol="PLAINTEXT",
            mqtt_host=mosquitto.get_container_host_ip(), mqtt_port=int(mosquitto.get_exposed_port(1883)),
            mqtt_username="machinedata", mqtt_password=mqtt_password,
            influx_url=influx.get_url(), influx_username="admin", influx_password=influx_password,
            prometheus_port=int(prometheus.get_exposed_port(9090)))
        _wait_for_prometheus(settings)
        yield settings
    finally:
        for container in reversed(started):
            container.stop()


def _wait_for_prometheus(settings: Settings, timeout_s: float = 60) -> None:
    def ready() -> bool:
        try:
            checks.prometheus_targets(settings)
            return True
        except OSError:
            return False

    wait_until(ready, timeout_s, "prometheus container ready", interval_s=1)


def test_transactions_in_containers(container_settings: Settings) -> None:
    checks.check_transactions(container_settings)


def test_mqtt_auth_in_containers(container_settings: Settings) -> None:
    checks.check_mqtt_auth(container_settings)


def test_influxdb_in_containers(container_settings: Settings) -> None:
    checks.check_influx_write_read(container_settings)


def test_prometheus_in_containers(container_settings: Settings) -> None:
    assert {t["labels"]["job"] for t in checks.prometheus_targets(container_settings)} >= {"prometheus"}
