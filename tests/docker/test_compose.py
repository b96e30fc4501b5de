"""Static checks of the Docker deployment: docker-compose.yml, Dockerfile, .env.example and the
configuration files they mount. No Docker engine needed.

`docker compose config` runs where the compose CLI plugin (or a v2 standalone docker-compose)
exists; the YAML checks below always run and cover what compose itself does not enforce.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from stacktools.stack.access import USERS
from streamkit.fields import credential_env
from tests.support.compose import compose_cli

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker-compose.yml"
ENV_EXAMPLE = REPO / ".env.example"
DOCKERFILE = REPO / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"
DATASOURCES = REPO / "grafana" / "provisioning" / "datasources" / "datasources.yaml"
DASHBOARD_PROVIDERS = REPO / "grafana" / "provisioning" / "dashboards" / "dashboards.yaml"

SECRETS = (
    *(credential_env(system, user) for system, users in USERS.items() for user in users),
    "GRAFANA_ADMIN_PASSWORD",
)
SPARK_CLUSTER = ("spark-master", "spark-worker-1", "spark-worker-2")
#: The one config model every service reads (see streamkit.config); .env.example documents all.
CONFIG_MODEL = (
    "KAFKA_BOOTSTRAP_SERVERS",
    "MQTT_HOST",
    "MQTT_PORT",
    "INFLUX_URL",
    "INFLUX_DATABASE",
    "LOG_LEVEL",
    "TOPIC_PARTITIONS",
    "SPARK_MASTER",
    *SECRETS,
)
#: Each service's own passwords: (compose variable, what the service reads it as).
OWN_PASSWORDS = {
    "simulator": {"MQTT_PASSWORD": "MQTT_MACHINE_PASSWORD"},
    "mqtt-bridge": {
        "KAFKA_PASSWORD": "KAFKA_BRIDGE_PASSWORD",
        "MQTT_PASSWORD": "MQTT_BRIDGE_PASSWORD",
    },
    "spark-single-pass": {
        "KAFKA_PASSWORD": "KAFKA_SPARK_SINGLE_PASS_PASSWORD",
        "SPARK_CLUSTER_PASSWORD": "SPARK_CLUSTER_PASSWORD",
    },
    "db-connector": {
        "KAFKA_PASSWORD": "KAFKA_CONNECTOR_PASSWORD",
        "INFLUX_PASSWORD": "INFLUX_CONNECTOR_PASSWORD",
    },
    "alert-forwarder": {"KAFKA_PASSWORD": "KAFKA_ALERTS_PASSWORD"},
    "grafana": {
        "GF_SECURITY_ADMIN_PASSWORD": "GRAFANA_ADMIN_PASSWORD",
        "INFLUX_PASSWORD": "INFLUX_GRAFANA_PASSWORD",
    },
}
#: The services the product is made of; the compose file must declare every one.
REQUIRED_SERVICES = (
    "kafka",
    "certs",
    "config",
    "provision",
    "mosquitto",
    "influxdb",
    "prometheus",
    "grafana",
    *SPARK_CLUSTER,
    "simulator",
    "mqtt-bridge",
    "spark-single-pass",
    "db-connector",
    "alert-forwarder",
    "disk-space",
    "schema-registry",
)
#: Services of ours that connect to no server (so need no CA): the disk reporter, the
#: registry volume's one-shot and the configurations' one-shot.
CONNECT_TO_NOTHING = ("disk-space", "schema-registry-storage", "config")
#: The services that write or read the data topics: each must follow SCHEMA_REGISTRY.
REGISTRY_CLIENTS = ("mqtt-bridge", "spark-single-pass", "db-connector")
DEFAULT_METRICS_PORTS = {
    "simulator": 9201,
    "mqtt-bridge": 9202,
    "spark-single-pass": 9206,
    "db-connector": 9205,
    "alert-forwarder": 9207,
}

# ${NAME}, ${NAME:-default}, ${NAME-default}, ${NAME:?err}, ${NAME?err}, ${NAME:+x}, and bare $NAME.
_INTERPOLATION = re.compile(
    r"\$(?:\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?P<op>:?[-?+])?(?P<arg>[^}]*)\}"
    r"|(?P<bare>[A-Za-z_][A-Za-z0-9_]*))"
)


# ------------------------------------------------------------------------------------ helpers
@cache
def compose_text() -> str:
    return COMPOSE_FILE.read_text()


def _unescaped(text: str) -> str:
    """Drop compose's `$$` escapes (a literal `$` for the container, not interpolation)."""
    return text.replace("$$", "")


def interpolations(text: str) -> list[tuple[str, str | None, str]]:
    """(name, operator, argument) of every compose interpolation in `text`."""
    found = []
    for m in _INTERPOLATION.finditer(_unescaped(text)):
        if m.group("braced"):
            found.append((m.group("braced"), m.group("op"), m.group("arg") or ""))
        else:
            found.append((m.group("bare"), None, ""))
    return found


@cache
def compose() -> dict[str, Any]:
    data = yaml.safe_load(compose_text())
    assert isinstance(data, dict) and isinstance(data.get("services"), dict), "no services: mapping"
    return data


def services() -> dict[str, dict[str, Any]]:
    return compose()["services"]


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {str(k): "" if v is None else str(v) for k, v in env.items()}


def env_example() -> dict[str, str]:
    values = {}
    for line in ENV_EXAMPLE.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            assert "=" in line, f".env.example: not KEY=VALUE: {line!r}"
            key, _, value = line.partition("=")
            assert key == key.strip() and re.fullmatch(r"[A-Z_][A-Z0-9_]*", key), f"bad key {key!r}"
            assert key not in values, f".env.example declares {key} twice"
            values[key] = value
    return values


def image_tag(image: str) -> str | None:
    """The tag of an image reference (None when it has none); a digest counts as a pin."""
    if "@sha256:" in image:
        return image.split("@", 1)[1]
    last = image.rsplit("/", 1)[-1]  # a registry host may carry a :port
    return last.split(":", 1)[1] if ":" in last else None


def is_pinned(image: str) -> bool:
    tag = image_tag(image)
    return bool(tag) and tag != "latest" and "$" not in image


def published_ports(service: dict[str, Any]) -> list[Any]:
    return list(service.get("ports") or [])


def healthcheck_is_real(service: dict[str, Any]) -> bool:
    check = service.get("healthcheck")
    if not isinstance(check, dict) or check.get("disable"):
        return False
    test = check.get("test")
    if isinstance(test, str):
        return bool(test.strip()) and test.strip() != "NONE"
    return isinstance(test, list) and len(test) >= 2 and test[0] in {"CMD", "CMD-SHELL"}


def bind_sources(service: dict[str, Any]) -> list[tuple[str, str]]:
    """(host path, container path) of every bind mount."""
    binds = []
    for volume in service.get("volumes") or []:
        if isinstance(volume, str):
            source, _, rest = volume.partition(":")
            if source.startswith((".", "/", "~")):
                binds.append((source, rest.split(":")[0]))
        elif volume.get("type") == "bind":
            binds.append((volume["source"], volume["target"]))
    return binds


def test_every_bind_mount_carries_the_selinux_label() -> None:
    """``z``: on Fedora or RHEL a container may read a bind mount only with it (elsewhere it
    changes nothing); the host's other requirements: tests/stacktools/test_compose_host.py."""
    mounts = [
        (name, volume)
        for name, service in services().items()
        for volume in service.get("volumes") or []
        if isinstance(volume, str) and volume.startswith("./")
    ]
    assert mounts
    for name, volume in mounts:
        options = volume.split(":")[2].split(",") if volume.count(":") >= 2 else []
        assert "z" in options, f"{name}: {volume}"


def named_volumes(service: dict[str, Any]) -> list[str]:
    names = []
    for volume in service.get("volumes") or []:
        if isinstance(volume, str):
            source, sep, _ = volume.partition(":")
            if sep and not source.startswith((".", "/", "~")):
                names.append(source)
        elif volume.get("type", "volume") == "volume" and volume.get("source"):
            names.append(volume["source"])
    return names


def mounted_volumes(service: dict[str, Any]) -> list[tuple[str, str]]:
    """(named volume, container path) of every named volume the service mounts."""
    mounts = []
    for volume in service.get("volumes") or []:
        if isinstance(volume, str):
            source, sep, rest = volume.partition(":")
            if sep and not source.startswith((".", "/", "~")):
                mounts.append((source, rest.split(":")[0]))
    return mounts


# ---------------------------------------------------------------------------- docker compose config
def compose_config(cli: list[str], env_file: Path, *args: str) -> subprocess.CompletedProcess:
    """`docker compose config` of the project's file with ``env_file`` alone: the variables of
    .env.example are left out of the environment, which would otherwise fill any gap."""
    return subprocess.run(
        [*cli, "-f", str(COMPOSE_FILE), "--env-file", str(env_file), "config", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k not in env_example()},
    )


def test_docker_compose_config_accepts_the_file() -> None:
    cli = compose_cli()
    if cli is None:
        pytest.skip(
            "neither `docker compose` (CLI plugin) nor a v2 docker-compose is installed; "
            "the YAML checks in this file still run"
        )
    result = compose_config(cli, ENV_EXAMPLE, "--quiet")
    assert result.returncode == 0, f"docker compose config failed:\n{result.stderr}"


def test_docker_compose_config_refuses_missing_secrets(tmp_path: Path) -> None:
    cli = compose_cli()
    if cli is None:
        pytest.skip("no docker compose CLI")
    for secret in SECRETS:
        env_file = tmp_path / f"without-{secret}.env"
        env_file.write_text("".join(f"{k}={v}\n" for k, v in env_example().items() if k != secret))
        result = compose_config(cli, env_file, "--quiet")
        assert result.returncode != 0 and secret in result.stderr, (
            f"compose accepted a missing {secret}"
        )


# ------------------------------------------------------------------------------------ YAML checks
def test_declares_every_service_of_the_stack() -> None:
    missing = [name for name in REQUIRED_SERVICES if name not in services()]
    assert not missing, f"docker-compose.yml lacks services: {missing}"


def test_every_service_has_a_pinned_image_or_a_build() -> None:
    bad = []
    for name, service in services().items():
        image = service.get("image")
        if image is not None and not is_pinned(str(image)):
            bad.append(f"{name}: image {image!r} is not pinned to a tag other than latest")
        if image is None and "build" not in service:
            bad.append(f"{name}: neither image nor build")
    assert not bad, "\n".join(bad)


def test_image_pin_detection_is_strict() -> None:
    # The rule above must reject what it is meant to reject.
    assert not is_pinned("apache/kafka") and not is_pinned("apache/kafka:latest")
    assert not is_pinned("localhost:5000/kafka") and is_pinned("localhost:5000/kafka:4.3.1")
    assert is_pinned("influxdb:1.8.10") and is_pinned("prom/prometheus@sha256:" + "0" * 64)


def test_built_services_use_the_repo_dockerfile() -> None:
    for name, service in services().items():
        build = service.get("build")
        if build is None:
            continue
        context = build if isinstance(build, str) else build.get("context", ".")
        dockerfile = (
            "Dockerfile" if isinstance(build, str) else build.get("dockerfile", "Dockerfile")
        )
        assert (REPO / context / dockerfile).resolve() == DOCKERFILE.resolve(), (
            f"{name} builds {context}/{dockerfile}"
        )


def test_services_serving_a_port_have_a_healthcheck() -> None:
    missing = [
        name
        for name, service in services().items()
        if (service.get("ports") or service.get("expose")) and not healthcheck_is_real(service)
    ]
    assert not missing, f"services that serve a port without a healthcheck: {missing}"


def test_depends_on_uses_conditions_on_existing_services() -> None:
    problems = []
    for name, service in services().items():
        depends = service.get("depends_on")
        if depends is None:
            continue
        if not isinstance(depends, dict):
            problems.append(f"{name}: depends_on is a list (no conditions)")
            continue
        for target, spec in depends.items():
            condition = (spec or {}).get("condition")
            if target not in services():
                problems.append(f"{name}: depends on unknown service {target}")
            elif condition not in {
                "service_healthy",
                "service_completed_successfully",
                "service_started",
            }:
                problems.append(f"{name} -> {target}: condition {condition!r}")
            elif condition == "service_healthy" and not healthcheck_is_real(services()[target]):
                problems.append(
                    f"{name} -> {target}: waits for health but {target} has no healthcheck"
                )
            elif (
                condition == "service_completed_successfully"
                and services()[target].get("restart", "no") != "no"
            ):
                problems.append(f'{name} -> {target}: one-shot {target} must have restart: "no"')
    assert not problems, "\n".join(problems)


def test_provisioning_runs_once_after_kafka_and_influxdb_and_gates_the_pipeline() -> None:
    provision = services()["provision"]
    assert " ".join(map(str, provision.get("command") or [])).endswith(
        "stacktools.stack provision kafka influxdb"
    )
    for server in ("kafka", "influxdb"):
        assert provision["depends_on"][server]["condition"] == "service_healthy"
    for consumer in ("mqtt-bridge", "spark-single-pass", "db-connector", "grafana"):
        assert (
            services()[consumer]["depends_on"]["provision"]["condition"]
            == "service_completed_successfully"
        )


def test_each_service_is_given_only_its_own_passwords() -> None:
    """Least privilege: a service's environment holds its own users' passwords and no other;
    only the one-shot provisioning job (the admin) sees the service users' passwords."""
    for name, own in OWN_PASSWORDS.items():
        env = environment(services()[name])
        given = {
            key: interpolations(value)[0][0] for key, value in env.items() if "PASSWORD" in key
        }
        assert given == own, f"{name}: {given}"
    # the servers' own passwords are in their configurations, rendered by the `config` job
    # (tests/docker/test_compose_config.py)
    provision = {
        interpolations(v)[0][0]
        for k, v in environment(services()["provision"]).items()
        if "PASSWORD" in k
    }
    assert provision == {
        credential_env(system, user) for system in ("kafka", "influx") for user in USERS[system]
    }
    for name, service in services().items():
        if name not in OWN_PASSWORDS and name not in ("provision", "config"):
            assert not [k for k in environment(service) if "PASSWORD" in k], (
                f"{name} is given a password"
            )


def test_the_spark_cluster_authenticates_with_the_shared_secret_as_the_local_one_does() -> None:
    """spark.authenticate on the master and every worker, the secret from .env in their
    environment (the variable Spark reads, as the launcher hands it over), workers sized by the
    launcher's settings; the job is the only other service given the secret."""
    for name in SPARK_CLUSTER:
        env = environment(services()[name])
        # the launcher's properties (spark.authenticate among them), rendered by the config job
        command = services()[name]["command"]
        assert command[command.index("--properties-file") + 1] == "/etc/spark/spark.conf", name
        assert "spark-config:/etc/spark:ro" in services()[name]["volumes"], name
        assert not [key for key in env if key.endswith("_OPTS")], name
        assert interpolations(env["_SPARK_AUTH_SECRET"]) == [
            ("SPARK_CLUSTER_PASSWORD", ":?", "set it in .env")
        ], name
        if name != "spark-master":
            assert interpolations(env["SPARK_WORKER_CORES"])[0][0] == "SPARK_WORKER_CORES"
            assert interpolations(env["SPARK_WORKER_MEMORY"])[0][0] == "SPARK_WORKER_MEMORY"
    holders = {
        name
        for name, service in services().items()
        if any("SPARK_CLUSTER_PASSWORD" in str(value) for value in environment(service).values())
    }
    assert holders == {*SPARK_CLUSTER, "spark-single-pass"}
    hosts = [services()[name]["hostname"] for name in SPARK_CLUSTER]
    assert len(set(hosts)) == len(hosts) and all(
        f'"{host}"' in json.dumps(services()[name]["command"])
        for name, host in zip(SPARK_CLUSTER, hosts, strict=True)
    )


def test_named_volumes_are_declared_and_bind_sources_exist() -> None:
    declared = set((compose().get("volumes") or {}).keys())
    problems = []
    used: set[str] = set()
    for name, service in services().items():
        for volume in named_volumes(service):
            used.add(volume)
            if volume not in declared:
                problems.append(f"{name}: volume {volume} is not declared under volumes:")
        for source, _ in bind_sources(service):
            if not (REPO / source).exists():
                problems.append(f"{name}: bind source {source} does not exist in the repo")
    unused = declared - used
    assert not problems and not unused, "\n".join(
        problems + [f"declared but unused: {sorted(unused)}"]
    )


def test_stateful_servers_keep_data_in_named_volumes() -> None:
    data_dirs = {
        "kafka": "/var/lib/kafka/data",
        "influxdb": "/var/lib/influxdb",
        "prometheus": "/prometheus",
        "grafana": "/var/lib/grafana",
        "mosquitto": "/mosquitto/data",
    }
    for name, target in data_dirs.items():
        targets = [
            v.split(":")[1]
            for v in services()[name].get("volumes", [])
            if isinstance(v, str) and not v.startswith((".", "/"))
        ]
        assert target in targets, f"{name}: {target} is not on a named volume"


def test_published_ports_bind_loopback_only() -> None:
    bad = []
    for name, service in services().items():
        for port in published_ports(service):
            if isinstance(port, dict):
                ok = port.get("host_ip") == "127.0.0.1" and port.get("published") is not None
            else:
                ok = str(port).startswith("127.0.0.1:") and str(port).count(":") >= 2
            if not ok:
                bad.append(f"{name}: {port!r}")
    assert not bad, f"ports not bound to 127.0.0.1: {bad}"


def test_secrets_have_no_default_in_compose() -> None:
    bad = []
    for name, op, arg in interpolations(compose_text()):
        if name in SECRETS and op not in (None, ":?", "?"):
            bad.append(f"${{{name}{op}{arg}}}")
    assert not bad, f"secrets with a default or alternative value: {bad}"
    # ...and every environment entry that carries a password takes it from a secret variable.
    for service_name, service in services().items():
        for key, value in environment(service).items():
            if "PASSWORD" in key:
                refs = interpolations(value)
                assert (
                    len(refs) == 1
                    and refs[0][0] in SECRETS
                    and refs[0][1] in (":?", "?")
                    and (whole := _INTERPOLATION.search(_unescaped(value))) is not None
                    and _unescaped(value).strip() == whole.group(0)
                ), f"{service_name}: {key}={value!r} is not a bare secret reference"
    for key in SECRETS:
        assert any(name == key for name, _, _ in interpolations(compose_text())), (
            f"{key} is never used"
        )


def test_secret_detection_catches_defaults() -> None:
    ops = {
        name: op
        for name, op, _ in interpolations(
            "a: ${MQTT_PASSWORD:-hunter2} b: $$NOT_A_VAR c: $LOG_LEVEL"
        )
    }
    assert ops == {"MQTT_PASSWORD": ":-", "LOG_LEVEL": None}


def test_every_compose_variable_is_in_env_example() -> None:
    documented = env_example()
    used = {name for name, _, _ in interpolations(compose_text())}
    missing = sorted(used - documented.keys())
    assert not missing, (
        f"variables used in docker-compose.yml but missing from .env.example: {missing}"
    )


def test_env_example_documents_the_config_model_with_placeholder_secrets() -> None:
    documented = env_example()
    missing = [name for name in CONFIG_MODEL if name not in documented]
    assert not missing, f".env.example lacks {missing}"
    for secret in SECRETS:
        assert documented[secret] == "change-me", (
            f"{secret} in .env.example must be the placeholder change-me"
        )
    text = ENV_EXAMPLE.read_text()
    for key in documented:  # every variable has a comment right above it (or above its group)
        block = text.split(f"\n{key}=", 1)[0].rstrip().splitlines()
        assert block and (block[-1].startswith("#") or re.match(r"[A-Z_]+=", block[-1])), (
            f"{key} has no comment"
        )


def test_services_read_the_config_model_with_in_network_addresses() -> None:
    expected = {
        "KAFKA_BOOTSTRAP_SERVERS": "${KAFKA_SERVERS:-kafka:19092}",
        "MQTT_HOST": "mosquitto",
        "INFLUX_URL": "https://influxdb:8086",
        "SPARK_MASTER": "spark://spark-master:7077",
        "MQTT_PORT": "8883",
        "TLS": "true",
        "TLS_CA_FILE": "/tls/ca.pem",
    }
    for name, port in DEFAULT_METRICS_PORTS.items():
        env = environment(services()[name])
        assert env.get("METRICS_PORT") == str(port), (
            f"{name}: METRICS_PORT {env.get('METRICS_PORT')!r} != {port}"
        )
        assert str(port) in [str(p) for p in services()[name].get("expose", [])], (
            f"{name} does not expose {port}"
        )
        for key, prefix in expected.items():
            assert env.get(key, "").startswith(prefix), f"{name}: {key}={env.get(key)!r}"
        for key in ("INFLUX_DATABASE", "LOG_LEVEL", "TOPIC_PARTITIONS"):
            assert key in env, f"{name} lacks {key}"


def test_influxdb_runs_our_entry_point_and_is_given_no_password() -> None:
    """Our entry point, not the image's (whose first start creates the admin over TCP with the
    password on the influx CLI's command line): the admin made through a private socket from
    the `config` job's statement (run for real in tests/docker/test_influxdb_entrypoint)."""
    influx = services()["influxdb"]
    assert influx["image"] == "influxdb:1.8.10"
    assert influx["entrypoint"] == ["/bin/bash", "/docker/influxdb/entrypoint.sh"]
    assert ("./docker/influxdb", "/docker/influxdb") in bind_sources(influx)
    assert not environment(influx), "the image's INFLUXDB_* would override the configuration"
    healthcheck = influx["healthcheck"]["test"]
    assert "https://localhost:8086/ping" in healthcheck and "/tls/ca.pem" in healthcheck


def test_every_hop_speaks_tls_with_the_certs_job_s_ca() -> None:
    """No service is told TLS=false; the certs job runs first, alone holds the CA's key and
    alone writes the `tls` volume, which every server and every client of ours mounts
    read-only."""
    assert not re.search(r"TLS:\s*\"?false", compose_text(), re.IGNORECASE)
    certs = services()["certs"]
    assert certs["command"][-3:] == ["stacktools.stack.certs", "--publish", "/tls"]
    assert sorted(mounted_volumes(certs)) == [("tls", "/tls"), ("tls-ca", "/app/run/tls")]
    ours = [
        name
        for name, service in services().items()
        if service.get("image", "").startswith("machinedata-app")
        and name not in ("certs", *CONNECT_TO_NOTHING)
    ]
    for name in ("kafka", "mosquitto", "influxdb", "grafana", "schema-registry", *ours):
        volumes = services()[name].get("volumes") or compose()["x-app"]["volumes"]
        assert "tls:/tls:ro" in volumes, f"{name} does not mount the CA read-only"
        assert not [v for v in volumes if str(v).startswith("tls-ca:")], name
    for server in ("kafka", "mosquitto", "influxdb", "schema-registry"):
        assert (
            services()[server]["depends_on"]["certs"]["condition"]
            == "service_completed_successfully"
        )
    assert services()["mosquitto"]["ports"] == ["127.0.0.1:${MQTT_PORT:-8883}:8883"]


def test_grafana_provisioning_is_mounted_and_datasources_have_fixed_uids() -> None:
    grafana = services()["grafana"]
    mounts = {dst: (REPO / src).resolve() for src, dst in bind_sources(grafana)}
    assert mounts.get("/etc/grafana/provisioning") == (REPO / "grafana" / "provisioning").resolve()
    providers = yaml.safe_load(DASHBOARD_PROVIDERS.read_text())["providers"]
    for provider in providers:
        assert provider["type"] == "file"
        assert (
            mounts.get(provider["options"]["path"]) == (REPO / "grafana" / "dashboards").resolve()
        )
    assert "GRAFANA_ADMIN_PASSWORD" in environment(grafana)["GF_SECURITY_ADMIN_PASSWORD"]

    datasources = {d["uid"]: d for d in yaml.safe_load(DATASOURCES.read_text())["datasources"]}
    assert {"influxdb", "prometheus"} <= datasources.keys()
    influx, prom = datasources["influxdb"], datasources["prometheus"]
    assert influx["type"] == "influxdb" and influx["jsonData"]["version"] == "InfluxQL"
    # HTTPS, verified against the stack's CA from the tls volume
    assert influx["url"].startswith("https://") and influx["jsonData"]["tlsAuthWithCACert"]
    assert not influx["jsonData"]["tlsSkipVerify"]
    assert influx["secureJsonData"]["tlsCACert"] == "$__file{/tls/ca.pem}"
    assert prom["type"] == "prometheus"
    for source, service in ((influx, "influxdb"), (prom, "prometheus")):
        match = re.match(r"https?://([^:/]+)", source["url"])
        assert match, source["url"]
        host = match.group(1)
        assert host == service and host in services(), f"{source['name']} points at {source['url']}"
    # Credentials and database come from Grafana's environment, never literals.
    env_ref = re.compile(r"^\$(__env\{(?P<a>\w+)\}|\{(?P<b>\w+)\}|(?P<c>\w+))$")
    for value, expected in (
        (influx["user"], "INFLUX_USERNAME"),
        (influx["secureJsonData"]["password"], "INFLUX_PASSWORD"),
        (influx["jsonData"]["dbName"], "INFLUX_DATABASE"),
    ):
        m = env_ref.match(str(value))
        assert m and expected in m.groupdict().values(), (
            f"{value!r} is not a reference to ${expected}"
        )
        assert expected in environment(grafana), f"grafana's environment lacks {expected}"


def test_dockerfile_pins_base_images_and_runs_as_non_root() -> None:
    text = DOCKERFILE.read_text()
    stages, bases = set(), []
    for m in re.finditer(
        r"^FROM\s+(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?", text, re.MULTILINE | re.IGNORECASE
    ):
        if m.group(1) not in stages:
            bases.append(m.group(1))
        if m.group(2):
            stages.add(m.group(2))
    assert len(bases) >= 2, f"expected a maven stage and a runtime stage, found {bases}"
    unpinned = [b for b in bases if not is_pinned(b)]
    assert not unpinned, f"unpinned base images: {unpinned}"
    assert any(b.startswith("maven:3.9") and "temurin-17" in b for b in bases)
    assert any(b.startswith("python:3.11") and "slim-bookworm" in b for b in bases)
    assert "kafka/pom-spark.xml" in text and "dependency:copy-dependencies" in text
    assert "openjdk-17-jre-headless" in text and re.search(r"pip install[^\n]*(/app|\s\.)", text)
    assert re.search(r"^ENV\s+SPARK_EXTRA_JARS_DIR=", text, re.MULTILINE)
    users = re.findall(r"^USER\s+(\S+)", text, re.MULTILINE)
    assert users and users[-1] not in {"root", "0"}, f"final USER is {users[-1:] or 'root (unset)'}"


def test_dockerfile_installs_dependencies_before_the_source_and_takes_extra_ca_certificates() -> (
    None
):
    """An edit of the code must not re-download pyspark; a TLS-inspecting proxy must not stop the
    build."""
    text = DOCKERFILE.read_text()
    assert text.index("pip install -r") < text.index("COPY . /app"), (
        "the source is copied before the dependencies"
    )
    assert "COPY pyproject.toml" in text and "COPY --from=requirements" in text
    assert len(re.findall(r"^ARG EXTRA_CA_CERTS", text, re.MULTILINE)) == 2, (
        "both stages (Maven and pip) take the CAs"
    )
    build = services()["certs"]["build"]
    assert build["args"]["EXTRA_CA_CERTS"] == "${EXTRA_CA_CERTS:-}"
    assert [name for name, service in services().items() if "build" in service] == ["certs"], (
        "one service builds the app image; the others run it (pull_policy: never)"
    )


def test_dockerignore_keeps_local_state_and_secrets_out_of_the_image() -> None:
    patterns = {
        line.strip().rstrip("/")
        for line in DOCKERIGNORE.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    for required in (
        ".venv",
        "run",
        ".stack",
        ".git",
        ".env",
        "data",
        "tests/data",
        "demo-output*",
    ):
        assert required in patterns, f".dockerignore lacks {required}"
    assert any("__pycache__" in p for p in patterns)


def test_env_example_is_valid_for_the_local_stack_settings(tmp_path: Path) -> None:
    # The same .env drives `python -m stacktools.stack`: every value must parse in its config model.
    # the project's own packages: an import failure is a failure
    from stacktools.stack import settings as stack_settings
    from streamkit import config

    values = config.read_env_file(ENV_EXAMPLE)
    assert values == env_example(), "streamkit's .env parser reads .env.example differently"
    settings = stack_settings.Settings.from_sources(environ=values, cli={"run_dir": tmp_path})
    assert settings.bootstrap_servers == f"127.0.0.1:{values['KAFKA_PORT']}"
    assert settings.influx_base_url == f"https://127.0.0.1:{values['INFLUX_PORT']}"
    assert (settings.mqtt_port, settings.mqtt_password.reveal()) == (
        int(values["MQTT_PORT"]),
        "change-me",
    )
    assert settings.topic_partitions == int(values["TOPIC_PARTITIONS"])
    # METRICS_PORT is documented but left unset: 0 would give every local service a random port.
    assert "METRICS_PORT" not in values and "\n# METRICS_PORT=\n" in ENV_EXAMPLE.read_text()
    assert settings.metrics_port == 0  # the field's "unset": each service applies its own default


# ------------------------------------------------------------------------------------ disk space
def test_the_disk_reporter_watches_the_data_volumes_read_only_with_no_secret(
    tmp_path: Path,
) -> None:
    """The local launcher's disk-space component in compose: Kafka's and InfluxDB's data volumes
    (the very volumes the servers write) mounted read-only, nothing else mounted, no password
    and no variable holding one, named `kafka` and `influxdb` as locally, so the alert sees the
    same `dir` labels; Prometheus scrapes it with the local stack's labels."""
    from stacktools.stack.disk_space import watched

    disk = services()["disk-space"]
    assert disk["command"] == ["python", "-m", "stacktools.stack.disk_space"]
    assert sorted(disk["volumes"]) == [
        "influxdb-data:/data/influxdb:ro",
        "kafka-data:/data/kafka:ro",
    ]
    assert ("kafka-data", "/var/lib/kafka/data") in mounted_volumes(services()["kafka"])
    assert ("influxdb-data", "/var/lib/influxdb") in mounted_volumes(services()["influxdb"])
    env = environment(disk)
    assert {name: str(path) for name, path in watched(env["DISK_WATCH"]).items()} == {
        "kafka": "/data/kafka",
        "influxdb": "/data/influxdb",
    }
    assert not [k for k in env if "PASSWORD" in k or "SECRET" in k], env
    assert not any(ref[0] in SECRETS for ref in interpolations(json.dumps(disk))), disk
    # mounted only after the servers' own first mount (podman gives a new volume's ownership to
    # the first container that mounts it)
    assert disk["depends_on"] == {
        "kafka": {"condition": "service_started"},
        "influxdb": {"condition": "service_started"},
    }
    assert "ports" not in disk and disk["expose"] == [env["METRICS_PORT"]]
    assert env["METRICS_HOST"] == "0.0.0.0" and healthcheck_is_real(disk)
    # the target compose's Prometheus is given, with the labels the launcher gives its own
    # reporter's target: the alert sees the same series
    from stacktools.stack.servers.disk_space import DiskSpace
    from stacktools.stack.servers.prometheus import COMPOSE_TARGETS
    from stacktools.stack.settings import Settings

    assert COMPOSE_TARGETS["disk_space"] == f"disk-space:{env['METRICS_PORT']}"
    local = DiskSpace(Settings.from_sources(environ={"STACK_RUN_DIR": str(tmp_path)}))
    local.prepare()
    [target] = json.loads(local.target_file.read_text())
    assert target["labels"] == {"service": "disk_space", "job": "disk_space"}


# ------------------------------------------------------------------------------- schema registry
REGISTRY_ENV_FILE_LINES = ("SCHEMA_REGISTRY=true", "COMPOSE_PROFILES=registry")


def test_the_registry_is_an_optional_profile_with_the_local_stack_s_options() -> None:
    """Profile `registry` only; the launcher's Apicurio configuration as the `config` job renders
    it (tests/docker/test_compose_config.py), read by Quarkus from its volume, with the certs
    job's certificate, its own copy of the key and the H2 file on a named volume; the same JVM
    options; HTTPS health check with the CA; published on 127.0.0.1 only."""
    from stacktools.stack import certs
    from stacktools.stack.servers.registry import REGISTRY_GC, REGISTRY_HEAP

    registry = services()["schema-registry"]
    assert registry["profiles"] == ["registry"]
    assert registry["image"] == "apicurio/apicurio-registry:3.0.9"
    env = environment(registry)
    assert env == {
        "QUARKUS_CONFIG_LOCATIONS": "/etc/apicurio/registry.properties",
        # the collector where the image's launcher takes it instead of its own (two collectors
        # stop the JVM: tests/docker/test_standins.py), the heap after its defaults
        "GC_CONTAINER_OPTIONS": REGISTRY_GC,
        "JAVA_OPTS_APPEND": " ".join(REGISTRY_HEAP),
    }
    assert sorted(registry["volumes"]) == [
        "schema-registry-config:/etc/apicurio:ro",
        "schema-registry-data:/var/lib/apicurio",
        "tls:/tls:ro",
    ]
    assert registry["ports"] == ["127.0.0.1:${SCHEMA_REGISTRY_PORT:-8085}:8085"]
    check = " ".join(registry["healthcheck"]["test"])
    assert "https://localhost:8085/health/ready" in check and "--cacert /tls/ca.pem" in check
    assert "schema-registry" in certs.DEFAULT_NAMES, "the certificate must name the service"
    # its storage is handed to the image's user by a one-shot of the same profile, offline
    storage = services()["schema-registry-storage"]
    assert storage["profiles"] == ["registry"] and storage["restart"] == "no"
    assert storage["network_mode"] == "none"
    assert storage["volumes"] == ["schema-registry-data:/var/lib/apicurio"]
    assert f"chown {certs.REGISTRY_IMAGE_UID}:0 /var/lib/apicurio" in " ".join(storage["command"])
    assert registry["depends_on"]["schema-registry-storage"] == {
        "condition": "service_completed_successfully"
    }
    # without the profile nothing of it runs
    plain = [
        name
        for name, service in services().items()
        if "registry" in (service.get("profiles") or [])
    ]
    assert sorted(plain) == ["schema-registry", "schema-registry-storage"]


def test_producers_and_readers_follow_schema_registry_and_wait_for_it_when_it_is_on() -> None:
    """The bridge, the Spark job and the connector read SCHEMA_REGISTRY from .env (default off:
    today's plain Avro) and the registry's in-network URL, and wait for it to be healthy only when
    its profile is on (`required: false`)."""
    for name in REGISTRY_CLIENTS:
        service = services()[name]
        env = environment(service)
        assert interpolations(env["SCHEMA_REGISTRY"]) == [("SCHEMA_REGISTRY", ":-", "false")]
        assert env["SCHEMA_REGISTRY_URL"] == "https://schema-registry:8085/apis/ccompat/v7"
        assert service["depends_on"]["schema-registry"] == {
            "condition": "service_healthy",
            "required": False,
        }, name
    assert env_example()["SCHEMA_REGISTRY"] == "false"
    text = ENV_EXAMPLE.read_text()
    assert "\n# COMPOSE_PROFILES=registry\n" in text, "the switch users uncomment"


def test_the_new_services_put_no_secret_on_a_command_line() -> None:
    """Neither the disk reporter, nor the registry, nor its one-shot is given a password, in its
    environment or on a command line (command, entry point, healthcheck)."""
    for name in ("disk-space", "schema-registry", "schema-registry-storage"):
        service = services()[name]
        lines = json.dumps(
            [service.get("command"), service.get("entrypoint"), service.get("healthcheck")]
        )
        assert not [ref for ref in interpolations(lines) if ref[0] in SECRETS], name
        assert "PASSWORD" not in lines and "SECRET" not in lines.upper(), name
        assert not [k for k in environment(service) if "PASSWORD" in k], name


def test_docker_compose_config_accepts_the_registry_profile(tmp_path: Path) -> None:
    """`docker compose config` with the two .env lines of docs/containers.md: the registry and
    its one-shot are in, and the producers' dependency on it is kept."""
    cli = compose_cli()
    if cli is None:
        pytest.skip("no docker compose CLI")
    env_file = tmp_path / "registry.env"
    env_file.write_text(
        ENV_EXAMPLE.read_text() + "".join(f"{line}\n" for line in REGISTRY_ENV_FILE_LINES)
    )
    result = compose_config(cli, env_file, "--format", "json")
    assert result.returncode == 0, result.stderr
    config = json.loads(result.stdout)["services"]
    assert {"schema-registry", "schema-registry-storage"} <= config.keys()
    for name in REGISTRY_CLIENTS:
        assert config[name]["environment"]["SCHEMA_REGISTRY"] == "true"
        assert "schema-registry" in config[name]["depends_on"]
    plain = compose_config(cli, ENV_EXAMPLE, "--format", "json")
    assert plain.returncode == 0, plain.stderr
    assert "schema-registry" not in json.loads(plain.stdout)["services"]
