"""One configuration model for every service: defaults < env files < environment < CLI.

The fields are grouped by concern: :class:`ServiceSettings` (what every process has) and one
mixin per server a process talks to (:class:`KafkaSettings`, :class:`MqttSettings`,
:class:`InfluxSettings`, :class:`PrometheusSettings`, :class:`AlertmanagerSettings`). Each
service's settings class composes only the concerns it uses and adds its own fields; the
launcher's own settings and the full model its tools read are the launcher's
(``stacktools.stack.settings``), not the core's. The CLI options and the environment variable
names are derived from the fields so the two never drift apart and ``--help`` documents both.
Secrets never have a value in the repository: the stack launcher generates local ones into
``<run dir>/credentials.env`` and a user may override them in the environment; the passwords
in ``.env`` are docker compose's and the local services ignore them.

Values are typed and checked when the settings load, never where they are used: passwords are
:class:`~streamkit.secret.Secret` (they never print), durations :class:`~datetime.timedelta`
('10s', '1h'), sizes :data:`~streamkit.sizes.ByteSize` ('64k', '2g'). A value that does not
convert is a :class:`~streamkit.errors.ConfigError` naming its variable (exit 2 at start-up).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal, Self, get_type_hints

from streamkit.fields import (
    COERCED,
    OldOptionText,
    argument_type,
    choices_of,
    convert,
    credential_env,
    default_note,
    field_text,
    identity_fields,
    is_secret_variable,
    legacy_option,
    legacy_reading,
    login_password,
    login_user,
    option_of,
    setting,
)
from streamkit.paths import default_run_dir, dotenv_path
from streamkit.secret import Secret

CREDENTIALS_FILE = "credentials.env"
#: The machine users' passwords (MQTT_MACHINE_IDENTITIES): a JSON object, Thing -> password;
#: a Thing is any name (streamkit.identifiers), which no KEY=VALUE line would carry.
MACHINE_CREDENTIALS_FILE = "machine-credentials.json"


#: The servers a process logs in to; each has one user per role (stacktools.stack.access).
SYSTEMS = ("kafka", "mqtt", "influx")


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


def dotenv_settings() -> dict[str, str]:
    """``.env`` without its passwords: those are docker compose's, and the local stack keeps its
    own (generated into the run directory, or given in the environment), so neither stack ever
    logs in with the other's credentials."""
    return {
        key: value
        for key, value in read_env_file(dotenv_path()).items()
        if not is_secret_variable(key)
    }


def _layered_sources(run_dir: Path, environ: Mapping[str, str]) -> dict[str, str]:
    """Generated credentials < .env (no passwords) < environment."""
    return {**read_env_file(run_dir / CREDENTIALS_FILE), **dotenv_settings(), **environ}


@dataclasses.dataclass(frozen=True)
class ServiceSettings:
    """What every process has: where it keeps its files, how it logs, where it serves /metrics.

    The concerns below (:class:`KafkaSettings`, :class:`MqttSettings`, :class:`InfluxSettings`,
    :class:`AlertmanagerSettings`) extend this; a service composes only the ones it talks to,
    so its ``--help`` and its environment hold nothing it never reads.
    """

    run_dir: Path = setting(
        default_run_dir(),
        "STACK_RUN_DIR",
        "directory for data, logs, pids and generated credentials",
    )
    log_level: str = setting("INFO", "LOG_LEVEL", "log level (DEBUG, INFO, WARNING, ERROR)")
    log_format: Literal["json", "text"] = setting(
        "json",
        "LOG_FORMAT",
        "json: one JSON object per line, for a log collector; text: plain lines for a person "
        "at a terminal",
    )
    metrics_port: int = setting(
        0,
        "METRICS_PORT",
        "port of this service's Prometheus /metrics and /healthz "
        "(each service has its own default; 0: any free port)",
    )
    metrics_host: str = setting(
        "127.0.0.1", "METRICS_HOST", "address /metrics binds to (0.0.0.0 inside containers)"
    )
    health_stall: timedelta = setting(
        timedelta(minutes=2),
        "HEALTH_STALL",
        "/healthz on the metrics port answers 503 after this long without progress",
        was="HEALTH_STALL_S",
    )
    tls: bool = setting(
        True,
        "TLS",
        "encrypt every connection to Kafka, MQTT and InfluxDB and verify the server's "
        "certificate against TLS_CA_FILE (false: plain TCP, for servers of your own without TLS)",
    )
    tls_ca_file: str = setting(
        "",
        "TLS_CA_FILE",
        "CA certificate (PEM) the servers' certificates are verified against "
        "(default: <run dir>/tls/ca.pem, made by the stack launcher)",
    )

    def __post_init__(self) -> None:
        """Text given for a secret, a duration or a size (a test's ``dataclasses.replace``,
        a caller's keyword) becomes its type, with the same checks as when loading."""
        hints = get_type_hints(type(self))
        for field in dataclasses.fields(self):
            kind, value = hints[field.name], getattr(self, field.name)
            if kind in COERCED and isinstance(value, str):
                converted = (
                    Secret(value) if kind is Secret else convert(kind, value, field.name, field)
                )
                object.__setattr__(self, field.name, converted)

    # ----------------------------------------------------------------------------- derived
    @property
    def credentials_path(self) -> Path:
        return self.run_dir / CREDENTIALS_FILE

    @property
    def ca_path(self) -> Path:
        """The CA every client verifies the servers against."""
        return Path(self.tls_ca_file) if self.tls_ca_file else self.run_dir / "tls" / "ca.pem"

    @classmethod
    def systems(cls) -> tuple[str, ...]:
        """The servers (of :data:`SYSTEMS`) this class logs in to: those whose identity fields
        it has."""
        names = {f.name for f in dataclasses.fields(cls)}
        return tuple(system for system in SYSTEMS if set(identity_fields(system)) <= names)

    def as_environment(self) -> dict[str, str]:
        """Every field but the identities as the environment variable that sets it: a child
        process given these resolves exactly these settings (run dir, ports, topics), whatever its
        own defaults or the caller's command-line options, and logs in as its own users with their
        passwords from ``credentials.env``, never with the caller's. A child with fewer concerns
        ignores the variables of the others (:meth:`from_sources` reads by field)."""
        identities = {name for system in self.systems() for name in identity_fields(system)}
        hints = get_type_hints(type(self))
        return {
            f.metadata["env"]: field_text(f, hints[f.name], getattr(self, f.name))
            for f in dataclasses.fields(self)
            if f.name not in identities
        }

    def credential(self, system: str, user: str) -> Secret:
        """The password of ``user`` on ``system`` from the environment or the generated
        credentials (in that order); empty when there is none yet. Reads no field but the run
        directory, so it works for any system, whichever concerns this class has."""
        return Secret(
            _layered_sources(self.run_dir, os.environ).get(credential_env(system, user), "")
        )

    def acting_as(self, system: str, user: str) -> Self:
        """These settings logged in as another user (tools and tests checking each role)."""
        if system not in self.systems():
            raise ValueError(f"{type(self).__name__} has no {system} login")
        username, password = identity_fields(system)
        identity: dict[str, Any] = {username: user, password: self.credential(system, user)}
        return dataclasses.replace(self, **identity)

    def redacted(self) -> dict[str, str]:
        """For logs: every field as text, secrets masked (a :class:`Secret` never prints)."""
        hints = get_type_hints(type(self))
        return {
            f.name: field_text(f, hints[f.name], getattr(self, f.name))
            for f in dataclasses.fields(self)
        }

    # ----------------------------------------------------------------------------- loading
    @classmethod
    def from_sources(
        cls, environ: Mapping[str, str] | None = None, cli: Mapping[str, Any] | None = None
    ) -> Self:
        """Resolve every field: CLI > environment > .env (no passwords) > generated credentials
        > default. Raises :class:`ConfigError` naming the variable of a value that does not
        convert."""
        environ = dict(os.environ if environ is None else environ)
        cli = {k: v for k, v in (cli or {}).items() if v is not None}
        hints = get_type_hints(cls)
        dotenv = dotenv_settings()
        run_dir_raw = (
            cli.get("run_dir") or environ.get("STACK_RUN_DIR") or dotenv.get("STACK_RUN_DIR")
        )
        run_dir = Path(run_dir_raw).expanduser() if run_dir_raw else default_run_dir()
        layered = _layered_sources(run_dir, environ)
        values: dict[str, Any] = {}
        defaults = {field.name: field.default for field in dataclasses.fields(cls)}
        legacy: list[tuple[str, str]] = []
        for field in dataclasses.fields(cls):
            env, old_env = field.metadata["env"], field.metadata.get("legacy_env")
            if field.name in cli:
                values[field.name] = value = cli[field.name]
                if isinstance(value, str):  # the raw text of a renamed duration (add_arguments)
                    old = isinstance(value, OldOptionText)
                    option = legacy_option(field) if old else option_of(field.name)
                    legacy.append((env, legacy_reading(field, option, value, old=old)))
            elif name := next((n for n in (env, old_env) if n and n in layered), None):
                values[field.name] = convert(hints[field.name], layered[name], name, field)
                note = legacy_reading(field, name, layered[name], old=name == old_env)
                legacy.append((env, note))
        # No password given: the one of the user this process logs in as.
        for system in cls.systems():
            username, password = identity_fields(system)
            if not values.get(password):
                values[password] = Secret(
                    layered.get(
                        credential_env(system, values.get(username, defaults[username])), ""
                    )
                )
        values["run_dir"] = run_dir
        settings = cls(**values)
        object.__setattr__(settings, "_legacy", tuple((env, note) for env, note in legacy if note))
        return settings

    def log_legacy(self) -> None:
        """Warn of each value read the old way (:func:`legacy_reading`): called once logging is
        set up, so the warning is in the service's own log format."""
        log = logging.getLogger("streamkit.config")
        for env, note in getattr(self, "_legacy", ()):
            log.warning("%s", note, extra={"setting": env})

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        """One --option per field; its help ends with the default and the environment variable
        to set instead. The options default to None, so that a value not given on the command
        line comes from the environment (:meth:`from_sources`)."""
        hints = get_type_hints(cls)
        group = parser.add_argument_group(
            "configuration (each also settable by environment variable)"
        )
        for field in dataclasses.fields(cls):
            kind = hints[field.name]
            option = option_of(field.name)
            text = f"{field.metadata.get('help', '')} {default_note(field, kind)}".replace(
                "%", "%%"
            )
            if kind is bool:
                group.add_argument(
                    option,
                    dest=field.name,
                    action=argparse.BooleanOptionalAction,
                    default=None,
                    help=text,
                )
            elif choices := choices_of(kind):
                group.add_argument(
                    option, dest=field.name, choices=choices, default=None, help=text
                )
            else:
                renamed = bool(field.metadata.get("legacy_unit"))
                group.add_argument(
                    option,
                    dest=field.name,
                    type=argument_type(kind, field, keep_text=str if renamed else None),
                    default=None,
                    metavar=field.metadata.get("env"),
                    help=text,
                )
                if renamed:  # the old option, for one release, unlisted
                    group.add_argument(
                        legacy_option(field),
                        dest=field.name,
                        type=argument_type(kind, field, keep_text=OldOptionText),
                        default=None,
                        help=argparse.SUPPRESS,
                    )

    @classmethod
    def parse(
        cls,
        argv: Sequence[str] | None = None,
        *,
        parser: argparse.ArgumentParser | None = None,
        description: str = "",
    ) -> tuple[Self, argparse.Namespace]:
        """Build the parser (or extend the caller's), parse argv and resolve the settings."""
        parser = parser or argparse.ArgumentParser(description=description)
        cls.add_arguments(parser)
        args = parser.parse_args(argv)
        field_names = {f.name for f in dataclasses.fields(cls)}
        return cls.from_sources(cli={k: v for k, v in vars(args).items() if k in field_names}), args


@dataclasses.dataclass(frozen=True)
class KafkaSettings(ServiceSettings):
    """The Kafka client's side: where the broker is, how to log in, and the pipeline's topics."""

    kafka_port: int = setting(
        9092, "KAFKA_PORT", "port of the local Kafka broker (node 1 of KAFKA_BROKERS)"
    )
    kafka_brokers: int = setting(
        1,
        "KAFKA_BROKERS",
        "Kafka nodes of the local stack (1, or 3 for a KRaft quorum with replication factor 3 "
        "and min.insync.replicas 2); node N listens on KAFKA_PORT + 2(N-1)",
    )
    kafka_bootstrap_servers: str = setting(
        "",
        "KAFKA_BOOTSTRAP_SERVERS",
        "Kafka bootstrap servers (default: every local node, 127.0.0.1:<kafka port>,...)",
    )
    kafka_username: str = login_user("kafka")
    kafka_password: Secret = login_password("kafka")
    kafka_security_protocol: str = setting(
        "",
        "KAFKA_SECURITY_PROTOCOL",
        "empty: SASL_SSL (SCRAM-SHA-512 over TLS, the stack's listener), or SASL_PLAINTEXT "
        "with TLS off; PLAINTEXT for an unauthenticated broker of your own",
    )
    raw_topic: str = setting(
        "machinedata.raw", "RAW_TOPIC", "Kafka topic of the per-quantity Avro measurements"
    )
    joined_topic: str = setting(
        "machinedata.joined", "JOINED_TOPIC", "Kafka topic of the join job's pairs"
    )
    aggregates_topic: str = setting(
        "machinedata.aggregates", "AGGREGATES_TOPIC", "Kafka topic of the window aggregates"
    )
    late_topic: str = setting(
        "machinedata.late", "LATE_TOPIC", "Kafka topic of records set aside as late, with a reason"
    )
    opstats_topic: str = setting(
        "machinedata.opstats",
        "OPSTATS_TOPIC",
        "Kafka topic of the operation statistics per component and reference cycle",
    )
    overloads_topic: str = setting(
        "machinedata.overloads",
        "OVERLOADS_TOPIC",
        "Kafka topic of the components' overload alerts, fired and resolved (compacted)",
    )
    dlq_topic: str = setting(
        "machinedata.dlq",
        "DLQ_TOPIC",
        "Kafka dead-letter topic: invalid input, with a reason header",
    )
    schema_registry: bool = setting(
        False,
        "SCHEMA_REGISTRY",
        "write Confluent's wire format (magic byte, schema id, Avro) with every schema "
        "registered in a schema registry, which the local stack then runs (Apicurio); false: "
        "plain Avro without a header (docs/schema-registry.md)",
    )
    schema_registry_port: int = setting(
        8085, "SCHEMA_REGISTRY_PORT", "port of the local schema registry"
    )
    schema_registry_url: str = setting(
        "",
        "SCHEMA_REGISTRY_URL",
        "Confluent-compatible schema registry API (default https://127.0.0.1:<schema registry "
        "port>/apis/ccompat/v7, http:// with TLS off)",
    )

    @property
    def registry_url(self) -> str:
        """The registry's Confluent-compatible API, without a trailing slash."""
        scheme = "https" if self.tls else "http"
        return (
            self.schema_registry_url
            or f"{scheme}://127.0.0.1:{self.schema_registry_port}/apis/ccompat/v7"
        ).rstrip("/")

    @property
    def bootstrap_servers(self) -> str:
        return self.kafka_bootstrap_servers or ",".join(
            f"127.0.0.1:{port}" for port in self.kafka_node_ports
        )

    @property
    def kafka_protocol(self) -> str:
        """The security protocol clients use: the setting, or the stack's listener's."""
        return self.kafka_security_protocol or ("SASL_SSL" if self.tls else "SASL_PLAINTEXT")

    @property
    def kafka_node_ports(self) -> list[int]:
        """The client port of each local Kafka node (all of them bootstrap: any one may be down)."""
        return [self.kafka_port + 2 * node for node in range(self.kafka_brokers)]


@dataclasses.dataclass(frozen=True)
class MqttSettings(ServiceSettings):
    """The MQTT client's side: the broker, the login and where rows are published."""

    mqtt_host: str = setting("127.0.0.1", "MQTT_HOST", "MQTT broker host")
    mqtt_port: int = setting(
        8883,
        "MQTT_PORT",
        "MQTT broker port (the stack's Mosquitto: MQTT over TLS, or plain with TLS off)",
    )
    mqtt_username: str = login_user("mqtt")
    mqtt_password: Secret = login_password("mqtt")
    mqtt_topic_prefix: str = setting(
        "machines", "MQTT_TOPIC_PREFIX", "rows are published to <prefix>/<Thing>"
    )
    mqtt_machine_identities: bool = setting(
        False,
        "MQTT_MACHINE_IDENTITIES",
        "one MQTT user per machine, named as its Thing, that may publish only to its own topic "
        "(<prefix>/<Thing>, <prefix>/<shard>/<Thing>); the launcher then drops the shared "
        "machine user, the simulator logs in as each Thing (passwords from <run dir>/"
        f"{MACHINE_CREDENTIALS_FILE}, made by python -m stacktools.stack machine-user) and the "
        "bridge dead-letters a row whose Thing is not its topic's (thing_mismatch)",
    )

    @property
    def machine_credentials_path(self) -> Path:
        """Each machine user's password (MQTT_MACHINE_IDENTITIES), as the launcher made it."""
        return self.run_dir / MACHINE_CREDENTIALS_FILE

    def machine_password(self, thing: str) -> Secret:
        """The password of the machine user ``thing`` (empty when it has none yet)."""
        path = self.machine_credentials_path
        if not path.is_file():
            return Secret()
        return Secret(json.loads(path.read_text(encoding="utf-8")).get(thing, ""))


@dataclasses.dataclass(frozen=True)
class InfluxSettings(ServiceSettings):
    """The InfluxDB client's side: the server, the login and the database."""

    influx_port: int = setting(8086, "INFLUX_PORT", "port of the local InfluxDB")
    influx_url: str = setting(
        "",
        "INFLUX_URL",
        "InfluxDB URL (default https://127.0.0.1:<influx port>, http:// with TLS off)",
    )
    influx_username: str = login_user("influx")
    influx_password: Secret = login_password("influx")
    influx_database: str = setting("machinedata", "INFLUX_DATABASE", "InfluxDB database")

    @property
    def influx_base_url(self) -> str:
        scheme = "https" if self.tls else "http"
        return self.influx_url or f"{scheme}://127.0.0.1:{self.influx_port}"


@dataclasses.dataclass(frozen=True)
class PrometheusSettings(ServiceSettings):
    """The local Prometheus: the launcher runs it, the dashboards' checker and the pipeline view
    query it."""

    prometheus_port: int = setting(9090, "PROMETHEUS_PORT", "port of the local Prometheus")


@dataclasses.dataclass(frozen=True)
class AlertmanagerSettings(ServiceSettings):
    """The local Alertmanager: the launcher runs it, the alert forwarder posts to it."""

    alertmanager_port: int = setting(
        9193,
        "ALERTMANAGER_PORT",
        "port of the local Alertmanager, which receives the alerts of prometheus/alerts.yml "
        "and the components' overload alerts",
    )
    alertmanager_host: str = setting(
        "127.0.0.1",
        "ALERTMANAGER_HOST",
        "host of the Alertmanager its clients post to (compose: the alertmanager service); "
        "the launcher's always listens on 127.0.0.1",
    )

    @property
    def alertmanager_url(self) -> str:
        return f"http://{self.alertmanager_host}:{self.alertmanager_port}"
