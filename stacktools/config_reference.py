"""python -m stacktools.config_reference [--check] [--output PATH]: the configuration reference.

Renders ``docs/configuration.md`` from the ``Settings`` dataclasses themselves (one row per
field: ``--option``, environment variable, type, default, help), so the document cannot drift
from the code: ``--check`` exits 1 when the file differs from what would be rendered now (the
unit tests run it). Every service option is a field, so the fields are the whole reference
(a tool's own flags, such as the dashboards checker's action and time range, are in its
``--help``); the variables docker compose sets for every application container are read from
``docker-compose.yml``.

The output must not depend on the machine or the environment: defaults are taken from the
dataclass fields (never from ``from_sources``), paths inside the repository are shown relative
to it, and secrets are never shown.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import sys
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from importlib import metadata
from pathlib import Path
from typing import Any, get_type_hints

import yaml

from spark_jobs.config import IdleSettings, SparkJobSettings, StatisticsSettings, WindowSettings
from stacktools.dashboards.cli import GrafanaSettings
from stacktools.harness.services import SERVICES
from stacktools.stack.access import USERS
from stacktools.stack.disk_space import DiskSpaceSettings
from streamkit.cli import HelpFormatter, entry_point
from streamkit.config import (
    CREDENTIALS_FILE,
    SYSTEMS,
    AlertmanagerSettings,
    InfluxSettings,
    KafkaSettings,
    MqttSettings,
    ServiceSettings,
    Settings,
    StackSettings,
    choices_of,
    credential_env,
    default_text,
    identity_fields,
)
from streamkit.paths import REPO_ROOT
from streamkit.secret import Secret
from streamkit.sizes import ByteSize

OUTPUT = REPO_ROOT / "docs" / "configuration.md"
COMPOSE_FILE = REPO_ROOT / "docker-compose.yml"
GENERATOR = "python -m stacktools.config_reference"


@dataclass(frozen=True)
class Section:
    """One concern (a group of fields several classes share) or one service of the reference."""

    title: str
    settings: type[ServiceSettings]
    intro: str
    service: str | None = None  #: name in the service registry (stacktools.harness.services)
    concern: bool = False  #: a mixin of streamkit.config that services compose
    short: str = ""  #: how other sections name it ("Kafka"); default the title up to " ("

    @classmethod
    def of_service(cls, name: str, intro: str) -> Section:
        """A service's section, named and typed by the service registry."""
        spec = SERVICES[name]
        return cls(f"{spec.title} (`python -m {spec.module}`)", spec.settings, intro, service=name)

    def settings_class(self) -> type[ServiceSettings]:
        return self.settings

    def parents(self) -> list[Section]:
        """The other sections whose class this one's derives from: their fields are documented
        there."""
        cls = self.settings_class()
        return [s for s in SECTIONS if s is not self and issubclass(cls, s.settings_class())]

    def own_fields(self) -> list[dataclasses.Field]:
        inherited = {
            f.name for parent in self.parents() for f in dataclasses.fields(parent.settings_class())
        }
        return [f for f in dataclasses.fields(self.settings_class()) if f.name not in inherited]

    def concerns(self) -> tuple[list[Section], list[Section], list[Section]]:
        """(the concerns this class has, the concerns it has not, the other sections whose fields it
        inherits, such as the Spark jobs' common ones)."""
        parents = self.parents()
        has = [s for s in CONCERNS if s in parents]
        return (
            has,
            [s for s in CONCERNS if s not in has],
            [s for s in parents if not s.concern and s.own_fields()],
        )

    @property
    def name(self) -> str:
        return self.short or self.title.split(" (")[0]


SECTIONS: tuple[Section, ...] = (
    Section(
        "Every service (`ServiceSettings`)",
        ServiceSettings,
        "`streamkit.config.ServiceSettings`: every service and tool accepts these. Each service "
        "has its own default `METRICS_PORT`, given in its section; 0 means any free port.",
        concern=True,
        short="service base",
    ),
    Section(
        "Kafka (`KafkaSettings`)",
        KafkaSettings,
        "`streamkit.config.KafkaSettings`: the broker, the login and the pipeline's topic names, "
        "for the services that read or write Kafka.",
        concern=True,
    ),
    Section(
        "MQTT (`MqttSettings`)",
        MqttSettings,
        "`streamkit.config.MqttSettings`: the broker, the login and the topic prefix, for the "
        "services that publish or subscribe.",
        concern=True,
    ),
    Section(
        "InfluxDB (`InfluxSettings`)",
        InfluxSettings,
        "`streamkit.config.InfluxSettings`: the server, the login and the database, for the "
        "services that write or query InfluxDB.",
        concern=True,
    ),
    Section(
        "Alertmanager (`AlertmanagerSettings`)",
        AlertmanagerSettings,
        "`streamkit.config.AlertmanagerSettings`: the local Alertmanager, which the stack "
        "launcher runs and the alert forwarder posts to.",
        concern=True,
    ),
    Section(
        "Stack launcher only (`StackSettings`)",
        StackSettings,
        "`streamkit.config.StackSettings`: servers no service talks to and how topics are "
        "provisioned; read by the stack launcher and its tools only.",
        concern=True,
        short="stack launcher",
    ),
    Section(
        "Stack launcher, tools and tests (`Settings`)",
        Settings,
        "`streamkit.config.Settings`, the full model: the stack launcher (`python -m "
        "stacktools.stack`), `python -m stacktools.stack.topics`, the demo, the benchmarks and the "
        "tests talk to every server. It passes its values to the services it starts as environment "
        "variables; each service reads those of its own concerns and ignores the rest.",
    ),
    Section.of_service(
        "simulator",
        "Replays an events.json file over MQTT (QoS 1) to `<MQTT_TOPIC_PREFIX>/<Thing>`.",
    ),
    Section.of_service(
        "mqtt_bridge",
        "MQTT (persistent session, QoS 1) -> `RAW_TOPIC` (idempotent producer, acks=all); invalid "
        "payloads -> `DLQ_TOPIC`. One bridge per `BRIDGE_CLIENT_ID`: the id names its MQTT "
        "session.",
    ),
    Section(
        "Spark jobs, common to all (`spark_jobs.join`, `spark_jobs.aggregate`, "
        "`spark_jobs.single_pass`)",
        SparkJobSettings,
        "`spark_jobs.config.SparkJobSettings`: every Spark job accepts these. The query name names "
        "the checkpoint, the `transactional.id` (`<Kafka user>.eos-<query>`) and the commit-marker "
        "key, so two jobs (or two instances of one job) must never share it. Each job logs in to "
        "Kafka as a user of its own (`spark-single-pass`, `spark-join`, `spark-aggregate`), whose "
        "transactional ids and consumer groups begin with its name and a dot.",
        short="Spark jobs' common",
    ),
    Section(
        "Idle timeout (`spark_jobs.join`, `spark_jobs.aggregate`, `spark_jobs.single_pass`)",
        IdleSettings,
        "`spark_jobs.config.IdleSettings`: after this much processing time without a record of a "
        "key, its open windows and the join's pending pairs are emitted anyway, the one output "
        "that depends on the wall clock (`docs/windows.md`, `docs/join.md`).",
        short="idle timeout",
    ),
    Section(
        "Operation statistics (`spark_jobs.join`, `spark_jobs.single_pass`)",
        StatisticsSettings,
        "`spark_jobs.config.StatisticsSettings`: the operation statistics per component (load "
        "spectrum, duty cycle, energy, overload alerts), computed beside the join in either shape "
        "(`docs/operation-statistics.md`).",
        short="operation statistics",
    ),
    Section.of_service(
        "spark_join",
        "LocalStreamBuffer join per Thing, the operation statistics beside it: `RAW_TOPIC` -> "
        "`JOINED_TOPIC` + `OPSTATS_TOPIC` + `OVERLOADS_TOPIC` + `LATE_TOPIC` (default query name "
        "`lsb-join`).",
    ),
    Section(
        "Window rules (`spark_jobs.aggregate`, `spark_jobs.single_pass`)",
        WindowSettings,
        "`spark_jobs.config.WindowSettings`: the windows and their lateness, idle and future rules "
        "(`docs/windows.md`), for the jobs that aggregate.",
        short="window rules",
    ),
    Section.of_service(
        "spark_aggregate",
        "Event-time windows per (thing, quantity): `RAW_TOPIC` (or `JOINED_TOPIC` with `--source "
        "joined`) -> `AGGREGATES_TOPIC` + `LATE_TOPIC` (default query name `aggregate`, or "
        "`aggregate-joined`). A second instance for `--source joined` needs its own `METRICS_PORT` "
        "on the same host.",
    ),
    Section.of_service(
        "spark_single_pass",
        "The join, the operation statistics and the windows in one stateful pass per Thing: "
        "`RAW_TOPIC` -> `JOINED_TOPIC` + `OPSTATS_TOPIC` + `OVERLOADS_TOPIC` + "
        "`AGGREGATES_TOPIC` + `LATE_TOPIC`, one transaction per batch (default query name "
        "`single-pass`); writes what `spark_jobs.join` and `spark_jobs.aggregate` write together.",
    ),
    Section.of_service(
        "db_connector",
        "Committed Kafka records -> InfluxDB points. Several instances share the work with the "
        "same `CONNECTOR_GROUP_ID` and distinct `CONNECTOR_INSTANCE_ID`s.",
    ),
    Section.of_service(
        "alert_forwarder",
        "The components' overload alerts: `OVERLOADS_TOPIC` (read whole at each start, "
        "committed records only) -> Alertmanager's API, each firing alert posted again every "
        "`ALERTS_RESEND`, each resolve once (`docs/operation-statistics.md`).",
    ),
    Section(
        "Disk space reporter (`python -m stacktools.stack.disk_space`)",
        DiskSpaceSettings,
        "Serves the free space of the filesystems holding the given data directories on "
        "/metrics, for the disk alert. The stack launcher runs it (component `disk-space`) for "
        "its Kafka and InfluxDB data directories, on any free port it hands Prometheus as a file "
        "target.",
    ),
    Section(
        "Dashboards checker (`python -m stacktools.dashboards`)",
        GrafanaSettings,
        "Runs every panel's query against the real InfluxDB and Prometheus, as Grafana's read-only "
        "user. Its action (`validate`, `list`, `check`) and the check's time range, variables and "
        "output are tool flags, listed by `python -m stacktools.dashboards --help`.",
    ),
)


#: The mixins of streamkit.config, in the order the document lists them.
CONCERNS: tuple[Section, ...] = tuple(section for section in SECTIONS if section.concern)


#: Environment variables read outside the Settings classes: (name, where, meaning). The unit
#: test checks that each still occurs somewhere in the repository outside docs/.
OTHER_VARIABLES: tuple[tuple[str, str, str], ...] = (
    (
        "STACK_ALLOW_EXTERNAL",
        "stack launcher",
        "1: use a compatible server already listening on a port instead of failing",
    ),
    (
        "INFLUXD_BIN",
        "stack launcher",
        "path of an influxd 1.8 binary to use instead of the one scripts/setup.sh builds",
    ),
    ("KAFKA_CLUSTER_ID", "docker compose", "KRaft cluster id of the compose broker"),
    (
        "GRAFANA_ADMIN_PASSWORD",
        "docker compose",
        "password of Grafana's admin user (required, no default)",
    ),
    ("GRAFANA_PORT", "docker compose", "host port of Grafana (3000)"),
    (
        "EVENTS_FILE",
        "docker compose",
        "file in ./data the compose `simulator` (profile replay) replays (events.json)",
    ),
    (
        "REPLAY_LIVE",
        "docker compose",
        "true: the compose replay stamps rows with the wall clock (default); "
        "false: the file's own timestamps",
    ),
    (
        "REPLAY_RATE",
        "docker compose",
        "rows per second of the compose replay (100: the sample in 50 s; 0: as fast as possible)",
    ),
    (
        "EXTRA_CA_CERTS",
        "docker compose, image builds",
        "PEM certificates of a TLS-inspecting proxy, trusted by pip and Maven inside the image "
        "builds",
    ),
    (
        "CONTAINER_SOCKET",
        "container engine (no Docker)",
        "unix socket of podman's Docker-compatible API (/run/podman/podman.sock)",
    ),
    ("STACK_KEEP", "tests", "1: keep a stack the test session started running afterwards"),
    ("BRIDGE_KILL_ROUNDS", "tests", "kill -9 rounds of the bridge fault test (3)"),
    ("JOIN_KILL_ROUNDS", "tests", "kill rounds of the Spark join fault test (6)"),
    ("CONNECTOR_KILL_ROUNDS", "tests", "kill -9 rounds of the connector fault test (3)"),
    ("EOS_FAULT_ROUNDS", "tests", "extra random kill rounds of the exactly-once sink test"),
    (
        "EOS_FAULT_POINT",
        "tests (fault injection)",
        "with EOS_FAULT_BATCH: the test drivers (tests/drivers/eos_driver.py, "
        "tests/drivers/faulty_job.py) give the exactly-once sink a hook that SIGKILLs the driver "
        "at that point of that batch; the services never read it",
    ),
    ("CHAOS_KILLS_PER_STAGE", "tests", "kills per stage of the whole-pipeline chaos test"),
    (
        "CLIENT_FAULT_SCALE",
        "tests",
        "multiplies every fault rate of the client-level fault injection test (1.0)",
    ),
    (
        "CLIENT_FAULTS",
        "tests (fault injection)",
        "SEED,SCALE: with tests/support/faults/site on PYTHONPATH, Kafka and InfluxDB client calls "
        "fail at random; never set it in production",
    ),
    ("LSB_HYPOTHESIS_EXAMPLES", "tests", "examples per property test of the join library (40)"),
    ("FUZZ_SECONDS", "tests", "seconds of coverage-guided fuzzing per target in tests/fuzz (8)"),
    ("FLOOD_SECONDS", "tests", "seconds of the MQTT flood in tests/mqtt_bridge/test_flood.py (30)"),
)

_TYPE_NAMES = {
    bool: "bool",
    int: "int",
    float: "float",
    str: "string",
    Path: "path",
    timedelta: "duration",
    ByteSize: "size",
    Secret: "secret",
}


def env_of(field: dataclasses.Field) -> str:
    return field.metadata["env"]


def option_of(field: dataclasses.Field, kind: Any) -> str:
    option = "--" + field.name.replace("_", "-")
    return f"{option}, --no-{option[2:]}" if kind is bool else option


# ----------------------------------------------------------------------------- markdown helpers
def cell(text: str) -> str:
    """Plain text in a table cell: pipes split cells, and `<x>` / `*` would be read as HTML or
    emphasis by GitHub."""
    return text.replace("|", "\\|").replace("<", "\\<").replace("*", "\\*").replace("\n", " ")


def code(text: str) -> str:
    """A code span in a table cell (GFM needs the pipe escaped even there)."""
    return f"`{text.replace('|', chr(92) + '|')}`"


def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def format_default(field: dataclasses.Field, kind: Any) -> str:
    """The default as ``--help`` shows it (:func:`streamkit.config.default_text`)."""
    if field.metadata.get("secret"):
        return "(generated)"
    text = default_text(field, kind)
    return code(text) if text else "(empty)"


# ----------------------------------------------------------------------------- settings rows
def settings_rows(section: Section) -> list[list[str]]:
    hints = get_type_hints(section.settings_class())
    rows = []
    for field in section.own_fields():
        kind = hints[field.name]
        secret = bool(field.metadata.get("secret"))
        help_text = field.metadata.get("help", "")
        if secret:
            help_text += "; see *Users and passwords*"
        type_name = " \\| ".join(choices_of(kind)) or _TYPE_NAMES.get(kind, str(kind))
        rows.append(
            [
                code(option_of(field, kind)),
                code(env_of(field)),
                type_name,
                format_default(field, kind),
                cell(help_text),
            ]
        )
    return rows


# ----------------------------------------------------------------------------- compose
def compose_app_environment(path: Path = COMPOSE_FILE) -> dict[str, str]:
    """What docker-compose.yml sets for every application container (its ``x-app-env``)."""
    if not path.is_file():
        return {}
    document = yaml.safe_load(path.read_text()) or {}
    return {str(k): str(v) for k, v in (document.get("x-app-env") or {}).items()}


# ----------------------------------------------------------------------------- the document
#: Each console script of pyproject.toml's [project.scripts]: its ``python -m`` module and
#: what it is for (the unit test checks both lists name the same programs).
PROGRAMS_RUN: dict[str, tuple[str, str]] = {
    "mds-simulator": ("simulator", "replays an events file to MQTT as machines would"),
    "mds-generate": (
        "simulator.generate",
        "writes a realistic events file, deterministic from a seed",
    ),
    "mds-bridge": ("mqtt_bridge", "MQTT -> Kafka bridge"),
    "mds-join": ("spark_jobs.join", "Spark job: the LocalStreamBuffer join per Thing"),
    "mds-aggregate": ("spark_jobs.aggregate", "Spark job: window aggregates"),
    "mds-single-pass": (
        "spark_jobs.single_pass",
        "Spark job: the join and the windows in one query",
    ),
    "mds-connector": ("db_connector", "Kafka -> InfluxDB connector"),
    "mds-alerts": ("alert_forwarder", "the components' overload alerts -> Alertmanager"),
    "mds-lsb": ("lsb", "the join library offline, on a file"),
    "mds-stack": ("stacktools.stack", "starts, stops and provisions the local stack"),
    "mds-demo": ("stacktools.demo", "the demo: the whole pipeline on an events file, with plots"),
    "mds-disk-space": (
        "stacktools.stack.disk_space",
        "serves the free space of the data directories' disks on /metrics",
    ),
    "mds-verify": (
        "stacktools.verify",
        "checks that InfluxDB, or the Kafka topics, hold exactly what an events file implies",
    ),
    "mds-dashboards": (
        "stacktools.dashboards",
        "checks the Grafana dashboards' queries without a Grafana",
    ),
    "mds-topics": ("stacktools.stack.topics", "creates the declared Kafka topics, reports drift"),
    "mds-config-reference": ("stacktools.config_reference", "renders this page"),
    "mds-compose-env": (
        "stacktools.compose.env",
        "writes docker compose's .env with generated passwords",
    ),
    "mds-certs": (
        "stacktools.stack.certs",
        "makes or rotates the local stack's CA and server certificate",
    ),
    "mds-container-engine": (
        "stacktools.compose.engine",
        "podman's Docker-compatible API for the compose stack",
    ),
}


def console_scripts(path: Path = REPO_ROOT / "pyproject.toml") -> list[str]:
    """The names of ``[project.scripts]`` (an installed copy has no pyproject.toml: then the
    installed distribution's)."""
    if path.is_file():
        with path.open("rb") as handle:
            return list(tomllib.load(handle)["project"]["scripts"])
    installed = {entry.name for entry in metadata.entry_points(group="console_scripts")}
    return [name for name in PROGRAMS_RUN if name in installed]


def program_rows() -> str:
    rows = []
    for name in console_scripts():
        module, purpose = PROGRAMS_RUN[name]
        rows.append(f"| `{name}` | `python -m {module}` | {purpose} |")
    return "\n".join(rows)


HEADER = f"""# Configuration reference

<!-- Generated by `{GENERATOR}` from the Settings dataclasses; do not edit by hand.
     `{GENERATOR} --check` (run by tests/stacktools/test_config_reference.py) fails when this
     file is stale. -->

Every service takes its configuration from one model (`streamkit/config.py`): each field of a
service's settings dataclass is a command-line option **and** an environment variable, and
`python -m <service> --help` lists both. This page is rendered from those dataclasses.

The fields are grouped by concern: what every service has, then one group per server (Kafka,
MQTT, InfluxDB) and the stack launcher's own. Each service has only the concerns it uses (its
section says which) plus its own fields; the launcher, the tools and the tests use the full
model. A variable of a concern a service lacks is ignored by that service.

## Where a value comes from

Highest precedence first; the first source that sets a variable wins:

1. the command line (`--kafka-port 19092`);
2. the process environment (`KAFKA_PORT=19092`);
3. `.env` in the repository root (plain `KEY=VALUE` lines; see `.env.example`);
4. `<run dir>/{CREDENTIALS_FILE}` (the passwords the stack launcher generated on its first `up`);
5. the default in the tables below.

The run directory itself (`STACK_RUN_DIR`) is taken from the command line, the environment or
`.env` only. Booleans accept `1/0`, `true/false`, `yes/no`, `on/off` in the environment and
`--x` / `--no-x` on the command line. Secrets have no default anywhere: the stack launcher
generates local ones, docker compose refuses to start without them in `.env`.

## Types, checked when the settings load

Every value is converted and checked when a program starts, never later where it is used:

- **duration**: `500ms`, `10s`, `1m`, `2h` (a bare number is seconds); where the meaning says
  so, `0` or `off` for none. Held as a `timedelta`.
- **size**: bytes, or `64k`, `1m`, `2g` (binary multiples, as the JVM and Spark read them).
- **secret**: a password; held as `streamkit.secret.Secret`, whose `repr` and `str` are `***`,
  so a settings object in a log line or a traceback shows no password.
- **a choice** (`a \\| b`): one of the values listed.

## Errors and exit codes

A value that does not convert, or settings that contradict each other, stop the program before
it starts anything: one line on stderr naming the variable, e.g.
`python -m mqtt_bridge: configuration error: BRIDGE_MAX_FUTURE: not a duration: '1 hour'`, and
exit code 2 (the command line's own mistakes, e.g. `--max-future 1x`, are reported by option
name, also with 2). Every error the project raises derives from `streamkit.errors.StackError`;
each package keeps its own in its `errors.py`. A program's `main` turns them into one line and
an exit code (`streamkit/cli.py`): 2 for configuration, the stack launcher's refusals and a
file the simulator cannot replay, 1 for the rest.

## Programs

Every service and tool is a console script once the project is installed (`pip install .`), and
also runs as `python -m <module>`:

| command | module | what it is |
|---|---|---|
@PROGRAMS@
"""


PER_SERVICE_FIELDS = {identity_fields(system)[0] for system in SYSTEMS} | {"metrics_port"}


def defaults_of(section: Section) -> dict[str, Any]:
    return {f.name: f.default for f in dataclasses.fields(section.settings_class())}


def users_and_passwords() -> list[str]:
    """Which password variable belongs to which user (stacktools/stack/access.py)."""
    lines = [
        "## Users and passwords",
        "",
        "Each service logs in to Kafka, MQTT and InfluxDB as a user of its own, with only the "
        "rights it needs (the README's access matrix). Each user's password is one variable; the "
        f"stack launcher generates every missing one into `<run dir>/{CREDENTIALS_FILE}` (mode "
        "0600) on `up`, and docker compose requires them in `.env`. `KAFKA_PASSWORD`, "
        "`MQTT_PASSWORD` and `INFLUX_PASSWORD` override the password of the one process they are "
        "given to.",
        "",
    ]
    logins: dict[tuple[str, str], list[str]] = {}
    for section in SECTIONS:
        cls = section.settings_class()
        defaults: dict[str, Any] = {f.name: f.default for f in dataclasses.fields(cls)}
        for system in cls.systems():
            username = identity_fields(system)[0]
            # listed where a class sets its own user, not again in classes that inherit it
            inherited = [p for p in section.parents() if username in defaults_of(p)]
            if not inherited:  # the concern that declares the field (and its shared default, admin)
                continue
            nearest = max(inherited, key=lambda p: len(p.settings_class().__mro__))
            if defaults[username] != defaults_of(nearest)[username]:
                logins.setdefault((system, defaults[username]), []).append(
                    section.title.split(" (")[0]
                )
    lines += table(
        ["server", "user", "password variable", "default user of"],
        (
            [
                system,
                code(user),
                code(credential_env(system, user)),
                ", ".join(
                    logins.get(
                        (system, user),
                        ["the stack launcher, tools and tests"]
                        if user == "admin"
                        else ["the server itself"],
                    )
                ),
            ]
            for system, users in USERS.items()
            for user in users
        ),
    )
    lines += [
        "",
        "The `*_USERNAME` variables choose another user for one process; each service's default is "
        "the user shown here.",
        "",
    ]
    return lines


def render() -> str:
    lines = [HEADER.replace("@PROGRAMS@", program_rows()).rstrip("\n"), ""]
    lines += ["## Contents", ""]
    lines += [f"- {section.title}" for section in SECTIONS]
    lines += [
        "- Users and passwords",
        "- Set by docker compose",
        "- Other environment variables",
        "",
    ]
    for section in SECTIONS:
        lines += [f"## {section.title}", "", section.intro, ""]
        if not section.concern:
            has, lacks, also = section.concerns()
            lines += [
                f"**Has:** {', '.join(c.name for c in [*has, *also])} settings"
                + (f" (not: {', '.join(c.name for c in lacks)})" if lacks else " (every concern)")
                + ", each in its section above, and the ones below.",
                "",
            ]
        if section.service:
            lines += [
                (
                    f"Metrics: `/metrics` on port {SERVICES[section.service].metrics_port} by "
                    f"default, service label `{section.service}`."
                ),
                "",
            ]
        rows = settings_rows(section)
        if rows:
            lines += table(["option", "environment", "type", "default", "meaning"], rows)
        else:
            lines.append("No settings of its own.")
        lines.append("")
    lines += users_and_passwords()
    compose = compose_app_environment()
    if compose:
        lines += [
            "## Set by docker compose",
            "",
            (
                "`docker-compose.yml` sets these for every container built from our `Dockerfile` "
                "(its `x-app-env`), on top of `.env`; each service also gets its own "
                "`METRICS_PORT` and ignores the variables of concerns it does not have. `${X:-d}` "
                "is compose's default, `${X:?...}` a variable it requires."
            ),
            "",
        ]
        lines += table(
            ["environment", "value in compose"], ([code(k), code(v)] for k, v in compose.items())
        )
        lines.append("")
    lines += [
        "## Other environment variables",
        "",
        "Read outside the Settings classes (no command-line option):",
        "",
    ]
    lines += table(
        ["environment", "read by", "meaning"],
        ([code(name), cell(where), cell(meaning)] for name, where, meaning in OTHER_VARIABLES),
    )
    lines.append("")
    return "\n".join(lines)


# ------------------------------------------------------------------------- checks used by the tests
def all_settings_classes() -> list[type[ServiceSettings]]:
    return [section.settings_class() for section in SECTIONS]


def env_conflicts() -> list[str]:
    """An environment name must mean one thing: one field name, one default, across classes."""
    meanings: dict[str, set[tuple[str, str]]] = {}
    for cls in all_settings_classes():
        names = [env_of(f) for f in dataclasses.fields(cls)]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            return [f"{cls.__name__}: several fields share {duplicates}"]
        for field in dataclasses.fields(cls):
            if field.name in PER_SERVICE_FIELDS:  # each service has its own user and port by design
                continue
            meanings.setdefault(env_of(field), set()).add((field.name, repr(field.default)))
    return [
        f"{env}: {sorted(values)}" for env, values in sorted(meanings.items()) if len(values) > 1
    ]


@entry_point("stacktools.config_reference")
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=GENERATOR, description=__doc__, formatter_class=HelpFormatter
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="exit 1 if the file differs from what would be rendered",
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=OUTPUT,
        help="file to write or check (default docs/configuration.md)",
    )
    args = parser.parse_args(argv)
    rendered = render()
    conflicts = env_conflicts()
    if conflicts:
        print(
            "environment variables with two meanings:\n  " + "\n  ".join(conflicts), file=sys.stderr
        )
        return 1
    if args.check:
        current = args.output.read_text() if args.output.is_file() else ""
        if current == rendered:
            print(f"{args.output}: up to date")
            return 0
        diff = difflib.unified_diff(
            current.splitlines(),
            rendered.splitlines(),
            str(args.output),
            "rendered",
            lineterm="",
            n=1,
        )
        print("\n".join(list(diff)[:60]), file=sys.stderr)
        print(f"{args.output} is stale: run {GENERATOR}", file=sys.stderr)
        return 1
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(rendered)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
