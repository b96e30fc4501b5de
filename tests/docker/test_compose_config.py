"""Compose's one-shot ``config`` job: every server's configuration rendered by the launcher's own
components (``python -m stacktools.stack render``), here run for real into a temporary
directory. What only compose can show is checked: the job is given the passwords those
configurations hold and nothing else, each server mounts its own volume read-only where its
rendered files say it is, every path a configuration names is mounted in that server's
container, each file belongs to the user the server's image runs as, and a refused password
stops the job by name. The settings themselves are the launcher's (tested on the local stack)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from stacktools.compose.credentials import PLACEHOLDER
from stacktools.resources import ALERT_RULES
from stacktools.stack import certs
from stacktools.stack.access import USERS
from stacktools.stack.errors import LauncherError
from stacktools.stack.render import COMPOSE_SERVERS, COMPOSE_TLS_DIR, RENDERED_USERS
from stacktools.stack.servers.alertmanager import alert_route
from stacktools.stack.servers.kafka import KAFKA_HEAP
from stacktools.stack.servers.prometheus import COMPOSE_TARGETS
from streamkit.fields import credential_env
from streamkit.paths import REPO_ROOT
from tests.support import server_checks as checks
from tests.support.compose import (
    CLUSTER_ID,
    config_job_environment,
    render_as_config_job,
    settings_of,
)
from tests.support.require import cannot_run

SERVICES: dict[str, dict[str, Any]] = yaml.safe_load(
    (REPO_ROOT / "docker-compose.yml").read_text()
)["services"]
CONFIG_JOB = SERVICES["config"]
WEBHOOK = "https://hooks.example/alerts?token=secret-token-1"


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    into = tmp_path_factory.mktemp("config")
    render_as_config_job(config_job_environment(WEBHOOK), into)
    return into


def mounts(service: dict[str, Any]) -> dict[str, tuple[str, bool]]:
    """Container path -> (volume or bind source, read-only)."""
    found = {}
    for volume in service.get("volumes", []):
        source, target, *options = str(volume).split(":")
        found[target] = (source, "ro" in ",".join(options).split(","))
    return found


def test_the_job_holds_the_passwords_the_configurations_hold_and_reaches_no_network() -> None:
    given = {key for key in CONFIG_JOB["environment"] if "PASSWORD" in key}
    assert given == {
        credential_env(system, user) for system, users in RENDERED_USERS.items() for user in users
    }
    assert CONFIG_JOB["network_mode"] == "none" and CONFIG_JOB["restart"] == "no"
    assert CONFIG_JOB["command"][:4] == ["python", "-m", "stacktools.stack", "render"]
    # the cluster id in one word: an id that begins with "-" is no option
    assert any(arg.startswith("--kafka-cluster-id=") for arg in CONFIG_JOB["command"])
    assert {target: source for target, (source, _) in mounts(CONFIG_JOB).items()} == {
        **{f"/config/{name}": f"{name}-config" for name in COMPOSE_SERVERS},
        # the machine users' passwords, made from an events file's Things (`machine-user`)
        "/machines": "machines",
        "/data": "./data",
    }
    assert mounts(CONFIG_JOB)["/data"][1], "the job may not write the data directory"


def readers(name: str) -> tuple[str, ...]:
    """The compose services that read server ``name``'s configuration."""
    return COMPOSE_SERVERS[name].readers or (name,)


def test_each_server_mounts_its_own_configuration_read_only_after_the_job() -> None:
    for name, server in COMPOSE_SERVERS.items():
        for reader in readers(name):
            service = SERVICES[reader]
            assert mounts(service)[str(server.conf_dir)] == (f"{name}-config", True), reader
            condition = service["depends_on"]["config"]["condition"]
            assert condition == "service_completed_successfully", reader
        others = [
            other
            for other, each in SERVICES.items()
            if other not in (*readers(name), "config")
            and any(source == f"{name}-config" for source, _ in mounts(each).values())
        ]
        assert not others, f"{name}'s configuration is mounted in {others}"


def absolute_paths(text: str) -> set[str]:
    """Every absolute path of two levels or more in ``text`` that begins a word or a value."""
    return set(re.findall(r"(?:(?<=[\s=\"'\[])|^)(/[\w.-]+(?:/[\w.*-]+)+)", text, re.MULTILINE))


def test_every_path_a_configuration_names_is_in_its_container(
    rendered: Path, tmp_path: Path
) -> None:
    """Each path lies on a mount of that server's service (or, for InfluxDB's bootstrap socket,
    in the directory its entry point makes), and each TLS file is one the certs job publishes."""
    made = certs.ensure(settings_of({}, tmp_path / "ca"))
    certs.publish(made, tmp_path / "tls", keystore_owner=0, registry_key_owner=0)
    published = {path.name for path in (tmp_path / "tls").iterdir()}
    for name in COMPOSE_SERVERS:
        targets = [*mounts(SERVICES[readers(name)[0]]), "/run/influxdb-bootstrap"]
        for path in sorted(p for p in (rendered / name).rglob("*") if p.is_file()):
            for named in absolute_paths(path.read_text()):
                assert any(named == t or named.startswith(t + "/") for t in targets), (
                    f"{path.relative_to(rendered)} names {named}, not in {name}'s container"
                )
                if named.startswith(f"{COMPOSE_TLS_DIR}/"):
                    assert Path(named).name in published, named


def test_every_file_belongs_to_the_user_its_server_runs_as(rendered: Path) -> None:
    for name, server in COMPOSE_SERVERS.items():
        files = [rendered / name, *(rendered / name).rglob("*")]
        assert len(files) > 1, f"nothing rendered for {name}"
        for path in files:
            mode = path.stat().st_mode & 0o777
            assert path.stat().st_uid == server.owner, path
            assert mode == (0o700 if path.is_dir() else 0o600), f"{path}: {oct(mode)}"


@pytest.mark.parametrize("value", [PLACEHOLDER, "short-1", 'quote"in-the-middle'])
def test_a_refused_password_stops_the_job_naming_it(tmp_path: Path, value: str) -> None:
    environ = config_job_environment(WEBHOOK) | {"MQTT_BRIDGE_PASSWORD": value}
    with pytest.raises(LauncherError, match="MQTT_BRIDGE_PASSWORD") as refused:
        render_as_config_job(environ, tmp_path / "config")
    assert value == PLACEHOLDER or value not in str(refused.value)  # a password is never shown
    assert not list((tmp_path / "config").glob("*/*"))  # nothing written


def properties(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def test_kafka_listens_where_the_services_and_the_healthcheck_connect(rendered: Path) -> None:
    conf = rendered / "kafka" / "kafka"
    server = properties(conf / "server.properties")
    bootstrap = SERVICES["mqtt-bridge"]["environment"]["KAFKA_BOOTSTRAP_SERVERS"]
    default = re.fullmatch(r"\$\{KAFKA_SERVERS:-(.*)\}", bootstrap)
    assert default, bootstrap
    assert f"INTERNAL://{default.group(1)}" in server["advertised.listeners"].split(",")
    assert set(server["listener.security.protocol.map"].split(",")) == {
        "INTERNAL:SASL_SSL",
        "HOST:SASL_SSL",
        "CONTROLLER:SASL_SSL",
    }
    assert properties(conf / "admin-client.properties")["security.protocol"] == "SASL_SSL"
    start = dict(
        line.removeprefix("export ").split("=", 1)
        for line in (conf / "kafka.env").read_text().splitlines()
    )
    assert start["KAFKA_HEAP_OPTS"] == f"'{' '.join(KAFKA_HEAP)}'"
    # the image's scripts would log into the container's layer without bound: console only
    log4j = COMPOSE_SERVERS["kafka"].conf_dir / "kafka" / "log4j2.properties"
    assert start["KAFKA_LOG4J_OPTS"] == f"'-Dlog4j2.configurationFile={log4j}'"
    assert "-loggc" not in start["EXTRA_ARGS"]
    assert "appender.out.type = Console" in (conf / "log4j2.properties").read_text()
    arguments = (conf / "storage-format.args").read_text().splitlines()
    assert f'"--cluster-id={CLUSTER_ID}"' in arguments


def test_mosquitto_s_healthcheck_logs_in_from_its_rendered_file(rendered: Path) -> None:
    healthcheck = " ".join(SERVICES["mosquitto"]["healthcheck"]["test"])
    assert " -P" not in healthcheck and "PASSWORD" not in healthcheck
    login = COMPOSE_SERVERS["mosquitto"].conf_dir / "healthcheck"
    assert f"XDG_CONFIG_HOME={login}" in healthcheck
    assert (
        (rendered / "mosquitto" / "healthcheck" / "mosquitto_pub")
        .read_text()
        .startswith("-u admin\n-P ")
    )
    users = (rendered / "mosquitto" / "passwd").read_text().split()
    assert [line.split(":")[0] for line in users] == list(USERS["mqtt"])
    assert all(":$7$" in line for line in users)  # hashes only


def test_prometheus_scrapes_every_compose_service_with_metrics(rendered: Path) -> None:
    with_metrics = {
        name: service["environment"]["METRICS_PORT"]
        for name, service in SERVICES.items()
        if "METRICS_PORT" in (service.get("environment") or {})
    }
    targets = json.loads((rendered / "prometheus" / "targets" / "compose.json").read_text())
    scraped = {t["targets"][0] for t in targets}
    assert scraped == {f"{name}:{port}" for name, port in with_metrics.items()}
    assert set(COMPOSE_TARGETS) == {t["labels"]["service"] for t in targets}
    assert (rendered / "prometheus" / "alerts.yml").read_text() == ALERT_RULES.read_text()


def test_alertmanager_s_routing_is_the_launcher_s_with_the_url_on_no_command_line(
    rendered: Path,
) -> None:
    written = rendered / "alertmanager" / "alertmanager.yml"
    routing = yaml.safe_load(written.read_text())
    assert routing["route"] == alert_route("webhook")
    assert routing["receivers"][0]["webhook_configs"][0] == {"url": WEBHOOK, "send_resolved": True}
    assert "ALERT_WEBHOOK_URL" not in json.dumps(SERVICES["alertmanager"])
    amtool = shutil.which("amtool")
    if amtool is None:
        cannot_run("amtool is not installed (scripts/setup.sh installs prometheus-alertmanager)")
    check = subprocess.run([amtool, "check-config", str(written)], capture_output=True, timeout=30)
    assert check.returncode == 0, check.stdout + check.stderr


def node_healthcheck(service: str) -> str:
    """The Kafka node's healthcheck as its shell runs it: KAFKA_NODE from its environment."""
    node = (SERVICES[service].get("environment") or {}).get("KAFKA_NODE", "kafka")
    test = " ".join(SERVICES[service]["healthcheck"]["test"])
    return test.replace("$${KAFKA_NODE:-kafka}", node)


def test_the_cluster_profile_s_nodes_are_the_launcher_s_three_nodes(tmp_path: Path) -> None:
    """KAFKA_BROKERS=3 with the `cluster` profile: the job renders every node's directory, each
    node's service reads its own and checks its own health, and the replication is
    production's (three replicas, two in sync), the internal topics' too."""
    render_as_config_job(config_job_environment() | {"KAFKA_BROKERS": "3"}, tmp_path)
    nodes = ["kafka", "kafka-2", "kafka-3"]
    assert [s for s in SERVICES if s.startswith("kafka")] == nodes
    conf_dir = COMPOSE_SERVERS["kafka"].conf_dir
    for number, node in enumerate(nodes, start=1):
        assert node == "kafka" or SERVICES[node]["profiles"] == ["cluster"]
        health = node_healthcheck(node)
        assert f"--bootstrap-server {node}:19092" in health, health
        assert f"--command-config {conf_dir / node / 'admin-client.properties'}" in health
        server = properties(tmp_path / "kafka" / node / "server.properties")
        assert server["node.id"] == str(number)
        assert server["controller.quorum.voters"] == "1@kafka:9093,2@kafka-2:9093,3@kafka-3:9093"
        host_port = re.search(r":(\d+)$", server["advertised.listeners"])
        published = SERVICES[node]["ports"][0]
        assert host_port and published.endswith(f"-{host_port.group(1)}}}:9092"), published
        checks.check_three_node_replication(server)


def test_the_spark_cluster_is_given_the_launcher_s_properties(rendered: Path) -> None:
    conf = dict(
        line.split("=", 1) for line in (rendered / "spark" / "spark.conf").read_text().splitlines()
    )
    assert conf["spark.authenticate"] == "true" and conf["spark.master.rest.enabled"] == "false"
