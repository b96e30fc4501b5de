"""The stand-ins fail where the official images fail (docker/standins): what compose meets of an
image is what the real image does. The registry's image (Apicurio on ubi9/openjdk-17-runtime)
starts the JVM through run-java.sh, which adds a collector of its own unless
GC_CONTAINER_OPTIONS names one; a collector also given in JAVA_OPTS_APPEND stops the JVM, which
is how compose's former setting failed with the real image while its stand-in started. The
Alpine and busybox images run compose's entry scripts and healthchecks in busybox's sh, not
Debian's dash; Prometheus, Alertmanager and Kafka run as the users the official images name, on
directories those users own, and Prometheus and Alertmanager are the versions compose pins, so
the project's alert rules are checked by the promtool that will load them. Kafka's broker writes
its GC and file logs where the official image's does, and the app image's build stage gets the
Maven of the tag it names."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from stacktools.compose import engine as container_engine
from stacktools.stack.servers.registry import REGISTRY_JVM_OPTIONS
from streamkit.paths import REPO_ROOT
from tests.support.compose import build_images, config_job_environment, render_as_config_job
from tests.support.require import cannot_run

pytestmark = pytest.mark.containers

COMPOSE = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())["services"]
REGISTRY = COMPOSE["schema-registry"]
#: The image of the app image's build stage, where Maven resolves Spark's connector jars.
MAVEN = re.findall(r"^FROM (maven:\S+)", (REPO_ROOT / "Dockerfile").read_text(), re.MULTILINE)
#: The images whose entry scripts or healthchecks compose runs in the image's /bin/sh.
BUSYBOX_SH = ("mosquitto", "prometheus", "alertmanager", "kafka")
#: What compose gave the registry until the collector moved to GC_CONTAINER_OPTIONS: every
#: option in JAVA_OPTS_APPEND.
FORMER = {"JAVA_OPTS_APPEND": " ".join(REGISTRY_JVM_OPTIONS)}
NOW = {key: REGISTRY["environment"][key] for key in ("GC_CONTAINER_OPTIONS", "JAVA_OPTS_APPEND")}


@pytest.fixture(scope="module")
def images() -> None:
    """The stand-ins, built once for this module (a no-op when their inputs did not change)."""
    if not shutil.which("podman"):
        cannot_run("podman is missing: scripts/setup-containers.sh installs it")
    build_images()


def podman(*args: str) -> subprocess.CompletedProcess[str]:
    """podman with this machine's settings; its runs never pull: the stand-ins are local."""
    return subprocess.run(
        ["podman", *args],
        env={**os.environ, **container_engine.engine_env()},  # podman's settings for here
        capture_output=True,
        text=True,
        timeout=120,
    )


def run(service: str, *args: str, entrypoint: str = "/bin/sh", mounts: tuple[str, ...] = ()) -> str:
    """``args`` run by ``entrypoint`` in a fresh container of the image compose gives ``service``,
    without a network and as the image's user; its output, once it exited 0."""
    volumes = [arg for mount in mounts for arg in ("--volume", mount)]
    image = COMPOSE[service]["image"]
    options = ["--rm", "--pull=never", "--network", "none", *volumes, "--entrypoint", entrypoint]
    done = podman("run", *options, image, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def image_config(service: str) -> dict:
    done = podman("image", "inspect", "--format", "{{json .Config}}", COMPOSE[service]["image"])
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def jvm_start(environment: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The registry image's launcher with ``environment``, its JVM asked for its version only:
    the JVM checks every option, then prints its version and exits, so no registry starts."""
    env = {**environment, "JAVA_OPTS_APPEND": environment["JAVA_OPTS_APPEND"] + " -version"}
    flags = [arg for key, value in env.items() for arg in ("--env", f"{key}={value}")]
    return podman("run", "--rm", "--pull=never", "--network", "none", *flags, REGISTRY["image"])


def test_the_registry_s_former_collector_setting_stops_its_jvm_and_the_current_one_starts(
    images: None,
) -> None:
    former = jvm_start(FORMER)
    assert former.returncode != 0, former.stdout + former.stderr
    assert "Multiple garbage collectors selected" in former.stdout + former.stderr
    now = jvm_start(NOW)
    assert now.returncode == 0, now.stdout + now.stderr
    assert 'openjdk version "17' in now.stderr, now.stderr


@pytest.mark.parametrize("service", BUSYBOX_SH)
def test_the_shell_of_entry_scripts_and_healthchecks_is_busybox_s(
    images: None, service: str
) -> None:
    """Alpine's and the busybox base's /bin/sh is busybox; Debian's dash takes scripts that
    busybox refuses and the other way round, so compose's scripts must meet the same one."""
    shell = run(service, "-c", "/bin/sh --help 2>&1 | head -n 1")
    assert shell.startswith("BusyBox"), shell


@pytest.mark.parametrize(
    ("service", "version", "storage"),
    [
        ("prometheus", "2.55.1", "--storage.tsdb.path=/prometheus"),
        ("alertmanager", "0.25.0", "--storage.path=/alertmanager"),
    ],
)
def test_prometheus_and_alertmanager_are_the_pinned_versions_run_by_nobody(
    images: None, service: str, version: str, storage: str
) -> None:
    """Compose gives Prometheus only its arguments and Alertmanager an entry script: both meet the
    official entry point and user, and the user owns the data volume's directory."""
    binary, data = f"/bin/{service}", storage.split("=")[1]
    config = image_config(service)
    assert config["Entrypoint"] == [binary] and config["User"] == "nobody", config
    assert storage in config["Cmd"], config
    assert f"version {version} " in run(service, "--version", entrypoint=binary)
    owners = run(service, "-c", f"id -un; stat -c %U:%G {data} /etc/{service}").split()
    assert owners == ["nobody", "nobody:nobody", "nobody:nobody"], owners


def test_the_alert_rules_and_the_configuration_pass_the_promtool_of_the_pinned_prometheus(
    images: None, tmp_path: Path
) -> None:
    """What compose's `config` job renders for Prometheus (the alert rules with it), as the
    image's own promtool reads it, mounted where compose mounts it, read as its user."""
    render_as_config_job(config_job_environment(), tmp_path)
    mounts = (f"{tmp_path / 'prometheus'}:/etc/prometheus:ro,z",)
    promtool = "/bin/promtool"
    rules = run(
        "prometheus",
        "check",
        "rules",
        "/etc/prometheus/alerts.yml",
        entrypoint=promtool,
        mounts=mounts,
    )
    assert "SUCCESS" in rules, rules
    config = run(
        "prometheus",
        "check",
        "config",
        "/etc/prometheus/prometheus.yml",
        entrypoint=promtool,
        mounts=mounts,
    )
    assert "is valid prometheus config file" in config, config


@pytest.mark.parametrize("webhook", ["", "https://hooks.example/alerts?token=a&b=%20"])
def test_the_rendered_routing_is_what_the_pinned_alertmanager_reads(
    images: None, tmp_path: Path, webhook: str
) -> None:
    """The `config` job's routing for Alertmanager, with a webhook and without, accepted by the
    image's amtool (of the Alertmanager that reads it), mounted where compose mounts it."""
    render_as_config_job(config_job_environment(webhook), tmp_path)
    mounts = (f"{tmp_path / 'alertmanager'}:/etc/alertmanager:ro,z",)
    check = ("check-config", "/etc/alertmanager/alertmanager.yml")
    out = run("alertmanager", *check, entrypoint="/bin/amtool", mounts=mounts)
    assert "SUCCESS" in out and " - 1 receivers" in out, out


def test_mosquitto_runs_as_root_and_its_user_1883_owns_mosquitto(images: None) -> None:
    """The official image has no USER: its entry point (compose's replaces it) runs as root, and
    mosquitto drops to its user, whose numeric id is what a volume's files keep."""
    assert image_config("mosquitto").get("User", "") in ("", "root", "0")
    ids = run(
        "mosquitto",
        "-c",
        "id -u; id -u mosquitto; id -g mosquitto; stat -c %u:%g /mosquitto /mosquitto/data",
    )
    assert ids.split() == ["0", "1883", "1883", "1883:1883", "1883:1883"], ids


def test_kafka_s_user_owns_what_the_official_image_gives_it(images: None) -> None:
    """appuser (uid 1000) in group appuser; the data directory appuser:root and group-writable;
    /opt/kafka its own, so the broker can write its logs there; the official volumes declared."""
    config = image_config("kafka")
    assert config["User"] == "appuser", config
    assert set(config["Volumes"]) == {
        "/etc/kafka/secrets",
        "/var/lib/kafka/data",
        "/mnt/shared/config",
    }
    facts = run(
        "kafka",
        "-c",
        "id -u; id -g; stat -c %U:%G:%A /var/lib/kafka /var/lib/kafka/data /opt/kafka",
    )
    assert facts.split() == [
        "1000",
        "1000",
        "appuser:root:drwxrwxr-x",
        "appuser:root:drwxrwxr-x",
        "appuser:appuser:drwxr-xr-x",
    ], facts


def test_the_kafka_broker_writes_its_gc_and_file_logs_under_opt_kafka_logs(images: None) -> None:
    """kafka-server-start.sh, as compose's entry script calls it, turns on a GC log and the
    broker's log4j configuration, which write under /opt/kafka/logs in the container's layer.
    A broker given no configuration file starts its JVM and logs why it stops, then exits."""
    start = "/opt/kafka/bin/kafka-server-start.sh /nonexistent.properties"
    script = f"{start}; echo exit=$?; ls /opt/kafka/logs"
    out = run("kafka", "-c", script, entrypoint="/bin/bash")
    assert "NoSuchFileException" in out and "exit=1" in out, out
    assert {"kafkaServer-gc.log", "server.log", "controller.log"} <= set(out.split()), out


def test_the_app_image_s_build_stage_runs_maven_3_9(images: None) -> None:
    """The build stage names no plugin version: Maven takes its own defaults for them, and those
    of the tag's Maven are not those of Debian's older one."""
    assert len(MAVEN) == 1, MAVEN
    done = podman("run", "--rm", "--pull=never", "--network", "none", MAVEN[0], "mvn", "--version")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("Apache Maven 3.9."), done.stdout
