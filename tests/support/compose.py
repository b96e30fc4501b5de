"""A docker compose project of docker-compose.yml, driven as a user drives it (the `docker
compose` CLI, Compose v2), against whatever engine DOCKER_HOST names: here podman's API
(stacktools.compose.engine). Each test project has its own name, .env and host ports."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from stacktools.compose import engine as container_engine
from stacktools.compose.env import EXAMPLE, render, write_private
from stacktools.stack.render import ComposeCluster
from stacktools.stack.settings import Settings
from streamkit.config import read_env_file
from streamkit.durations import parse_duration
from streamkit.paths import CACHE_DIR, REPO_ROOT
from streamkit.wire.retention import POLICIES
from tests.support.ports import free_ports

#: A replay of a file's own times (REPLAY_LIVE=false) into the project's database: its points
#: are years old, and InfluxDB drops a point older than its retention policy keeps.
KEEP_FOREVER = {f"INFLUX_RETENTION_{policy.upper()}": "off" for policy in POLICIES}

#: The host ports the compose file publishes (its ``${NAME:-default}``), as a test sets them.
PUBLISHED_PORTS = (
    "KAFKA_PORT",
    "KAFKA_2_PORT",
    "KAFKA_3_PORT",
    "MQTT_PORT",
    "INFLUX_PORT",
    "PROMETHEUS_PORT",
    "ALERTMANAGER_PORT",
    "SPARK_MASTER_UI_PORT",
    "GRAFANA_PORT",
    "SCHEMA_REGISTRY_PORT",
)


def free_published_ports() -> dict[str, int]:
    """A free host port for each published one: a test's project next to a running stack."""
    return dict(zip(PUBLISHED_PORTS, free_ports(len(PUBLISHED_PORTS)), strict=True))


#: Every service of the compose file but Grafana (no image of it can be made here) and the
#: replay's simulator (a profile of its own).
SERVER_SERVICES = (
    "kafka",
    "mosquitto",
    "influxdb",
    "prometheus",
    "alertmanager",
    "spark-master",
    "spark-worker-1",
    "spark-worker-2",
    "disk-space",
)
#: The `cluster` profile's other Kafka nodes.
CLUSTER_NODES = ("kafka-2", "kafka-3")
PIPELINE_SERVICES = ("mqtt-bridge", "spark-single-pass", "db-connector")
#: The overload alerts' way to Alertmanager (no part of the data's pipeline).
ALERT_SERVICES = ("alert-forwarder",)
ONE_SHOT = ("certs", "config", "provision")


def compose_cli() -> list[str] | None:
    """`docker compose` where the docker client has the plugin, else a v2 standalone
    docker-compose (on PATH or where scripts/setup-containers.sh builds it); None without one."""
    docker = shutil.which("docker")
    if (
        docker
        and subprocess.run(
            [docker, "compose", "version"], capture_output=True, timeout=30
        ).returncode
        == 0
    ):
        return [docker, "compose"]
    standalone = shutil.which("docker-compose") or str(CACHE_DIR / "bin" / "docker-compose")
    try:
        probe = subprocess.run([standalone, "version"], capture_output=True, text=True, timeout=30)
    except OSError:
        return None
    # v1 (python) does not understand the compose spec fully: v2 only
    return (
        [standalone]
        if probe.returncode == 0 and not re.search(r"version 1\.", probe.stdout)
        else None
    )


def compose_command() -> list[str]:
    cli = compose_cli()
    assert cli, "no docker compose v2: scripts/setup-containers.sh builds one"
    return cli


def build_images() -> None:
    """The stand-ins of the official images (cached: a no-op when their inputs did not change)."""
    done = subprocess.run(
        ["scripts/container-images.sh"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=2400
    )
    assert done.returncode == 0, (
        f"building the images failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )


@dataclass
class ComposeProject:
    name: str
    work: Path
    ports: dict[str, int]
    overrides: dict[str, str] = field(default_factory=dict)
    #: The events files a test put into ./data for the replay profile.
    events: list[Path] = field(default_factory=list)
    #: The checkout compose runs in (its compose file, its bind-mounted scripts and configs).
    checkout: Path = REPO_ROOT

    def __post_init__(self) -> None:
        self.env_file = self.work / ".env"
        lines = render(EXAMPLE.read_text())
        extra = {**{key: str(port) for key, port in self.ports.items()}, **self.overrides}
        write_private(
            self.env_file, lines + "".join(f"{key}={value}\n" for key, value in extra.items())
        )
        self.values = read_env_file(self.env_file)

    def env(self) -> dict[str, str]:
        """The engine's variables; none of the project's settings (compose reads them from the
        file)."""
        ours = set(self.values) | {"STACK_RUN_DIR", "DOCKER_HOST"}
        env = {k: v for k, v in os.environ.items() if k not in ours}
        ca = "".join(
            p.read_text() for p in sorted(Path("/usr/local/share/ca-certificates").glob("*.crt"))
        )
        return {**env, **container_engine.engine_env(), "EXTRA_CA_CERTS": ca}

    def run(
        self,
        *args: str,
        timeout_s: float = 600,
        check: bool = True,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """`docker compose ARGS` on this project; ``env``: variables that override the .env file
        for this call (compose prefers the environment)."""
        command = [*compose_command(), "-p", self.name, "--env-file", str(self.env_file), *args]
        done = subprocess.run(
            command,
            cwd=self.checkout,
            env={**self.env(), **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
        )
        if check and done.returncode != 0:
            raise AssertionError(
                f"{' '.join(command[-len(args) - 4 :])} exited {done.returncode}:\n"
                f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            )
        return done

    def states(self) -> dict[str, dict]:
        """service -> {State, Health, ExitCode} of every container of the project, stopped ones
        too."""
        out = self.run("ps", "--all", "--format", "json", timeout_s=60).stdout
        rows = [json.loads(line) for line in out.splitlines() if line.strip().startswith("{")]
        if len(rows) == 1 and isinstance(rows[0], list):
            rows = rows[0]
        return {row["Service"]: row for row in rows}

    def wait_ready(
        self, services: tuple[str, ...], one_shots: tuple[str, ...] = (), timeout_s: float = 600
    ) -> None:
        """Every service running and healthy, every one-shot exited 0; fails early on a one-shot
        that failed, with its log."""
        deadline = time.monotonic() + timeout_s
        states: dict[str, dict] = {}
        while time.monotonic() < deadline:
            states = self.states()
            for name in one_shots:
                row = states.get(name, {})
                if row.get("State") == "exited" and row.get("ExitCode") not in (0, None):
                    raise AssertionError(f"{name} exited {row.get('ExitCode')}:\n{self.logs(name)}")
            if all(
                states.get(n, {}).get("State") == "running" and states[n].get("Health") == "healthy"
                for n in services
            ) and all(states.get(n, {}).get("State") == "exited" for n in one_shots):
                return
            time.sleep(3)  # the polling pace; the deadline above bounds the wait
        summary = {
            n: (states.get(n, {}).get("State"), states.get(n, {}).get("Health"))
            for n in (*services, *one_shots)
        }
        late = [
            n for n, (state, health) in summary.items() if state != "running" or health != "healthy"
        ]
        raise AssertionError(
            f"not ready after {timeout_s:.0f} s: {summary}\n"
            + "\n".join(f"--- {n}\n{self.logs(n)}" for n in late if n not in one_shots)
        )

    def restart_count(self, service: str) -> int:
        """How often the engine restarted the service's container by its restart policy."""
        container = self.run("ps", "--all", "-q", service, timeout_s=60).stdout.split()[0]
        status, body = container_engine.api("GET", f"/containers/{container}/json")
        assert status == 200, body[:300]
        return int(json.loads(body).get("RestartCount") or 0)

    def unreachable_ports(self, services: tuple[str, ...], container_port: int) -> dict[str, str]:
        """The host ports ``services`` publish ``container_port`` on that a TCP connect from the
        host fails on, each with what the engine's port forwarding holds for it (podman's
        netavark: DNAT rules in iptables' nat table), so that a failure names the engine's state,
        not a timeout."""
        unreachable: dict[str, str] = {}
        for service in services:
            out = self.run(
                "port", service, str(container_port), check=False, timeout_s=60
            ).stdout.strip()
            for published in out.splitlines():
                host, _, port = published.rpartition(":")
                try:
                    socket.create_connection((host, int(port)), timeout=5).close()
                except OSError as exc:
                    rules = subprocess.run(
                        ["iptables", "-w", "-t", "nat", "-S"], capture_output=True, text=True
                    ).stdout
                    held = [rule for rule in rules.splitlines() if f"--dport {port} " in rule]
                    unreachable[f"{service} {published}"] = f"{exc}; DNAT rules: {held}"
        return unreachable

    def logs(self, service: str, lines: int = 60) -> str:
        done = self.run(
            "logs", "--no-color", "--tail", str(lines), service, timeout_s=60, check=False
        )
        return (done.stdout + done.stderr)[-6000:]

    def ca_file(self, run_dir: Path) -> Path:
        """The project's CA, copied out of its `tls` volume as docs/containers.md tells users."""
        target = run_dir / "compose-ca.pem"
        if not target.exists():
            self.run("cp", "certs:/tls/ca.pem", str(target), timeout_s=120)
        return target

    def host_settings(self, run_dir: Path) -> Settings:
        """How a tool on the host reaches the project's servers: published ports, the admins,
        TLS trusting the project's CA (the certificate names 127.0.0.1)."""
        environ = {
            "STACK_RUN_DIR": str(run_dir),
            "TLS": "true",
            "TLS_CA_FILE": str(self.ca_file(run_dir)),
            "KAFKA_PORT": str(self.ports["KAFKA_PORT"]),
            "INFLUX_PORT": str(self.ports["INFLUX_PORT"]),
            "MQTT_PORT": str(self.ports["MQTT_PORT"]),
            "PROMETHEUS_PORT": str(self.ports["PROMETHEUS_PORT"]),
            "KAFKA_USERNAME": "admin",
            "INFLUX_USERNAME": "admin",
            "MQTT_USERNAME": "admin",
        }
        environ |= {key: value for key, value in self.values.items() if key.endswith("_PASSWORD")}
        environ |= {
            "KAFKA_PASSWORD": self.values["KAFKA_ADMIN_PASSWORD"],
            "INFLUX_PASSWORD": self.values["INFLUX_ADMIN_PASSWORD"],
            "MQTT_PASSWORD": self.values["MQTT_ADMIN_PASSWORD"],
        }
        return Settings.from_sources(environ=environ)

    def down(self, *profiles: str) -> None:
        """Everything of the project, the replay's and ``profiles``' services too, volumes
        included."""
        self.run(
            *(arg for name in ("replay", *profiles) for arg in ("--profile", name)),
            "down",
            "--volumes",
            "--remove-orphans",
            "--timeout",
            "20",
            timeout_s=300,
            check=False,
        )


#: Compose's Kafka cluster as a test renders it: the id begins with "-", as one in 64 random ids
#: does; the ports are compose's defaults.
CLUSTER_ID = "-k8q5ZTADuRqefk4EFV4z"
CLUSTER = ComposeCluster(CLUSTER_ID, (9092, 9094, 9096))


def compose_services() -> dict[str, dict]:
    """docker-compose.yml's services, as written (anchors merged)."""
    return yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())["services"]


def healthcheck_bound_s(service: str) -> float:
    """The longest ``service``'s healthcheck takes to pass or give up, from docker-compose.yml:
    its start period, then its retries, each an interval and a timeout."""
    check = compose_services()[service]["healthcheck"]
    seconds = {
        key: parse_duration(check.get(key, "0s"), allow_zero=True).total_seconds()
        for key in ("start_period", "interval", "timeout")
    }
    return seconds["start_period"] + check["retries"] * (seconds["interval"] + seconds["timeout"])


def config_job_environment(webhook: str = "") -> dict[str, str]:
    """The `config` job's environment with a value for every variable compose gives it: a
    password of the right shape for each secret, compose's defaults for the rest."""
    job = compose_services()["config"]
    values = {}
    for key, value in job["environment"].items():
        default = re.fullmatch(r"\$\{\w+:-(.*)\}", str(value))
        values[key] = (
            f"{key.lower()}-of-the-test"
            if "PASSWORD" in key
            else default.group(1)
            if default
            else str(value)
        )
    return values | {"ALERT_WEBHOOK_URL": webhook}


def settings_of(environ: dict[str, str], run_dir: Path) -> Settings:
    return Settings.from_sources(environ={**environ, "STACK_RUN_DIR": str(run_dir)})


def render_as_config_job(environ: dict[str, str], into: Path) -> None:
    """What the `config` job writes into its volumes, under ``into`` (``render`` reads the
    passwords from the process's environment, as in the job's container)."""
    from stacktools.stack.render import render as render_configurations

    with pytest.MonkeyPatch.context() as patch:
        for key, value in environ.items():
            patch.setenv(key, value)
        render_configurations(settings_of(environ, into / "run"), into, CLUSTER)
