"""One configuration model for every service: defaults < env files < environment < CLI.

The fields are grouped by concern: :class:`ServiceSettings` (what every process has) and one
mixin per server a process talks to (:class:`KafkaSettings`, :class:`MqttSettings`,
:class:`InfluxSettings`) plus the launcher's own (:class:`StackSettings`). Each service's
settings class composes only the concerns it uses and adds its own fields; :class:`Settings`
composes them all for the launcher, the tools and the tests. The CLI options and the
environment variable names are derived from the fields so the two never drift apart and
``--help`` documents both. Secrets never have a value in the repository: the stack launcher
generates local ones into ``<run dir>/credentials.env`` and a user may override them in
``.env`` or the environment.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Self, get_type_hints

from streamkit.paths import REPO_ROOT, default_run_dir

CREDENTIALS_FILE = "credentials.env"


#: The servers a process logs in to; each has one user per role (stacktools.access).
SYSTEMS = ("kafka", "mqtt", "influx")


def setting(default: Any, env: str, help: str, *, secret: bool = False) -> Any:
    """Declare a field with its environment variable and help text."""
    return dataclasses.field(default=default, metadata={"env": env, "help": help, "secret": secret})


def credential_env(system: str, user: str) -> str:
    """Where the password of ``user`` on ``system`` lives (environment, .env or the generated
    credentials file): one variable per user, so each process is given only its own."""
    return f"{system.upper()}_{user.upper().replace('-', '_')}_PASSWORD"


def identity_fields(system: str) -> tuple[str, str]:
    return f"{system}_username", f"{system}_password"


def login_as(system: str, user: str) -> Any:
    """A service's own user on ``system``, in place of its concern's ``admin``."""
    server = {"kafka": "Kafka", "mqtt": "MQTT", "influx": "InfluxDB"}[system]
    return setting(user, f"{system.upper()}_USERNAME", f"{server} user this service logs in as (its rights: the "
                   "README's access matrix)")


def serves_metrics_on(port: int) -> Any:
    """A service's own default /metrics port (the local Prometheus scrapes exactly these)."""
    return setting(port, "METRICS_PORT", "port of this service's Prometheus /metrics and /healthz")


def read_env_file(path: Path) -> dict[str, str]:
    """Parse KEY=VALUE lines (the subset docker compose and systemd agree on)."""
    values: dict[str, str] = {}
    if not path.is_file():
        return values
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        values[key.strip().removeprefix("export ").strip()] = value
    return values


def _convert(kind: Any, raw: str, name: str) -> Any:
    try:
        if kind is bool:
            lowered = raw.strip().lower()
            if lowered not in {"1", "0", "true", "false", "yes", "no", "on", "off"}:
                raise ValueError(raw)
            return lowered in {"1", "true", "yes", "on"}
        if kind is Path:
            return Path(raw).expanduser()
        return kind(raw)
    except ValueError:
        raise SystemExit(f"configuration error: {name}={raw!r} is not a valid {getattr(kind, '__name__', kind)}") from None


def _to_text(value: Any) -> str:
    """The inverse of :func:`_convert`."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _layered_sources(run_dir: Path, environ: Mapping[str, str]) -> dict[str, str]:
    """Generated credentials < .env < environment."""
    return {**read_env_file(run_dir / CREDENTIALS_FILE), **read_env_file(REPO_ROOT / ".env"), **environ}


@dataclasses.dataclass(frozen=True)
class ServiceSettings:
    """What every process has: where it keeps its files, how it logs, where it serves /metrics.

    The concerns below (:class:`KafkaSettings`, :class:`MqttSettings`, :class:`InfluxSettings`,
    :class:`StackSettings`) extend this; a service composes only the ones it talks to, so its
    ``--help`` and its environment hold nothing it never reads, and :class:`Settings` composes all.
    """

    run_dir: Path = setting(default_run_dir(), "STACK_RUN_DIR", "directory for data, logs, pids and generated credentials")
    log_level: str = setting("INFO", "LOG_LEVEL", "log level (DEBUG, INFO, WARNING, ERROR)")
    metrics_port: int = setting(0, "METRICS_PORT", "port of this service's Prometheus /metrics and /healthz "
                                "(each service has its own default; 0: any free port)")
    metrics_host: str = setting("127.0.0.1", "METRICS_HOST", "address /metrics binds to (0.0.0.0 inside containers)")
    health_stall_s: float = setting(120.0, "HEALTH_STALL_S",
                                    "/healthz on the metrics port answers 503 after this long without progress")

    # ----------------------------------------------------------------------------- derived
    @property
    def credentials_path(self) -> Path:
        return self.run_dir / CREDENTIALS_FILE

    @classmethod
    def systems(cls) -> tuple[str, ...]:
        """The servers (of :data:`SYSTEMS`) this class logs in to: those whose identity fields it has."""
        names = {f.name for f in dataclasses.fields(cls)}
        return tuple(system for system in SYSTEMS if set(identity_fields(system)) <= names)

    def as_environment(self) -> dict[str, str]:
        """Every field but the identities as the environment variable that sets it: a child
        process given these resolves exactly these settings (run dir, ports, topics), whatever its
        own defaults or the caller's command-line options, and logs in as its own users with their
        passwords from ``credentials.env``, never with the caller's. A child with fewer concerns
        ignores the variables of the others (:meth:`from_sources` reads by field)."""
        identities = {name for system in self.systems() for name in identity_fields(system)}
        return {f.metadata["env"]: _to_text(getattr(self, f.name)) for f in dataclasses.fields(self)
                if f.name not in identities}

    def credential(self, system: str, user: str) -> str:
        """The password of ``user`` on ``system`` from the environment, .env or the generated
        credentials (in that order); empty when there is none yet. Reads no field but the run
        directory, so it works for any system, whichever concerns this class has."""
        return _layered_sources(self.run_dir, os.environ).get(credential_env(system, user), "")

    def acting_as(self, system: str, user: str) -> Self:
        """These settings logged in as another user (tools and tests checking each role)."""
        if system not in self.systems():
            raise ValueError(f"{type(self).__name__} has no {system} login")
        username, password = identity_fields(system)
        return dataclasses.replace(self, **{username: user, password: self.credential(system, user)})

    def redacted(self) -> dict[str, Any]:
        """For logs: every field, secrets masked."""
        return {f.name: ("***" if f.metadata.get("secret") and getattr(self, f.name) else getattr(self, f.name))
                for f in dataclasses.fields(self)}

    # ----------------------------------------------------------------------------- loading
    @classmethod
    def from_sources(cls, environ: Mapping[str, str] | None = None, cli: Mapping[str, Any] | None = None) -> Self:
        """Resolve every field: CLI > environment > .env > generated credentials > default."""
        environ = dict(os.environ if environ is None else environ)
        cli = {k: v for k, v in (cli or {}).items() if v is not None}
        hints = get_type_hints(cls)
        dotenv = read_env_file(REPO_ROOT / ".env")
        run_dir_raw = cli.get("run_dir") or environ.get("STACK_RUN_DIR") or dotenv.get("STACK_RUN_DIR")
        run_dir = Path(run_dir_raw).expanduser() if run_dir_raw else default_run_dir()
        layered = _layered_sources(run_dir, environ)
        values: dict[str, Any] = {}
        defaults = {field.name: field.default for field in dataclasses.fields(cls)}
        for field in dataclasses.fields(cls):
            if field.name in cli:
                values[field.name] = cli[field.name]
            elif field.metadata.get("env") in layered:
                values[field.name] = _convert(hints[field.name], layered[field.metadata["env"]], field.metadata["env"])
        for system in cls.systems():  # no password given: the one of the user this process logs in as
            username, password = identity_fields(system)
            if not values.get(password):
                values[password] = layered.get(credential_env(system, values.get(username, defaults[username])), "")
        values["run_dir"] = run_dir
        return cls(**values)

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """One --option per field; the default shown is the env variable to use instead."""
        hints = get_type_hints(cls)
        group = parser.add_argument_group("configuration (each also settable by environment variable)")
        for field in dataclasses.fields(cls):
            kind = hints[field.name]
            option = "--" + field.name.replace("_", "-")
            text = f"{field.metadata.get('help', '')} [env {field.metadata.get('env')}]".replace("%", "%%")
            if kind is bool:
                group.add_argument(option, dest=field.name, action=argparse.BooleanOptionalAction, default=None, help=text)
            else:
                converter = Path if kind is Path else kind
                group.add_argument(option, dest=field.name, type=converter, default=None, help=text)

    @classmethod
    def parse(cls, argv: Sequence[str] | None = None, *, parser: argparse.ArgumentParser | None = None,
              description: str = "") -> tuple[Self, argparse.Namespace]:
        """Build the parser (or extend the caller's), parse argv and resolve the settings."""
        parser = parser or argparse.ArgumentParser(description=description)
        cls.add_arguments(parser)
        args = parser.parse_args(argv)
        field_names = {f.name for f in dataclasses.fields(cls)}
        return cls.from_sources(cli={k: v for k, v in vars(args).items() if k in field_names}), args


@dataclasses.dataclass(frozen=True)
class KafkaSettings(ServiceSettings):
    """The Kafka client's side: where the broker is, how to log in, and the pipeline's topics."""

    kafka_port: int = setting(9092, "KAFKA_PORT", "port of the local Kafka broker")
    kafka_bootstrap_servers: str = setting("", "KAFKA_BOOTSTRAP_SERVERS", "Kafka bootstrap servers (default 127.0.0.1:<kafka port>)")
    kafka_username: str = setting("admin", "KAFKA_USERNAME", "Kafka SASL/SCRAM user this process logs in as "
                                  "(each service has its own default)")
    kafka_password: str = setting("", "KAFKA_PASSWORD", "Kafka password of that user (default: KAFKA_<USER>_PASSWORD, "
                                  "generated by the stack launcher)", secret=True)
    kafka_security_protocol: str = setting("SASL_PLAINTEXT", "KAFKA_SECURITY_PROTOCOL",
                                           "SASL_PLAINTEXT (SCRAM-SHA-512, the stack's listener) or PLAINTEXT for an "
                                           "unauthenticated broker of your own")
    raw_topic: str = setting("machinedata.raw", "RAW_TOPIC", "Kafka topic of the per-quantity Avro measurements")
    joined_topic: str = setting("machinedata.joined", "JOINED_TOPIC", "Kafka topic of the join job's pairs")
    aggregates_topic: str = setting("machinedata.aggregates", "AGGREGATES_TOPIC", "Kafka topic of the window aggregates")
    late_topic: str = setting("machinedata.late", "LATE_TOPIC", "Kafka topic of records set aside as late, with a reason")
    dlq_topic: str = setting("machinedata.dlq", "DLQ_TOPIC", "Kafka dead-letter topic: invalid input, with a reason header")

    @property
    def bootstrap_servers(self) -> str:
        return self.kafka_bootstrap_servers or f"127.0.0.1:{self.kafka_port}"


@dataclasses.dataclass(frozen=True)
class MqttSettings(ServiceSettings):
    """The MQTT client's side: the broker, the login and where rows are published."""

    mqtt_host: str = setting("127.0.0.1", "MQTT_HOST", "MQTT broker host")
    mqtt_port: int = setting(1883, "MQTT_PORT", "MQTT broker port")
    mqtt_username: str = setting("admin", "MQTT_USERNAME", "MQTT user this process logs in as (each service has its own default)")
    mqtt_password: str = setting("", "MQTT_PASSWORD", "MQTT password of that user (default: MQTT_<USER>_PASSWORD, "
                                 "generated by the stack launcher)", secret=True)
    mqtt_topic_prefix: str = setting("machines", "MQTT_TOPIC_PREFIX", "rows are published to <prefix>/<Thing>")


@dataclasses.dataclass(frozen=True)
class InfluxSettings(ServiceSettings):
    """The InfluxDB client's side: the server, the login and the database."""

    influx_port: int = setting(8086, "INFLUX_PORT", "port of the local InfluxDB")
    influx_url: str = setting("", "INFLUX_URL", "InfluxDB URL (default http://127.0.0.1:<influx port>)")
    influx_username: str = setting("admin", "INFLUX_USERNAME", "InfluxDB user this process logs in as (each service has "
                                   "its own default)")
    influx_password: str = setting("", "INFLUX_PASSWORD", "InfluxDB password of that user (default: "
                                   "INFLUX_<USER>_PASSWORD, generated by the stack launcher)", secret=True)
    influx_database: str = setting("machinedata", "INFLUX_DATABASE", "InfluxDB database")

    @property
    def influx_base_url(self) -> str:
        return self.influx_url or f"http://127.0.0.1:{self.influx_port}"


@dataclasses.dataclass(frozen=True)
class StackSettings(ServiceSettings):
    """What only the stack launcher and its tools read: servers no service talks to, and how
    topics are provisioned."""

    kafka_controller_port: int = setting(9093, "KAFKA_CONTROLLER_PORT", "port of the local KRaft controller")
    topic_partitions: int = setting(4, "TOPIC_PARTITIONS", "partitions of each data topic")
    prometheus_port: int = setting(9090, "PROMETHEUS_PORT", "port of the local Prometheus")


@dataclasses.dataclass(frozen=True)
class Settings(KafkaSettings, MqttSettings, InfluxSettings, StackSettings):
    """Every concern: the stack launcher, the tools and the tests, which talk to every server."""
