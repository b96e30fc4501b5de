"""The configuration reference's texts that no settings class holds: the page's header, every
program with its module and purpose, and the environment variables read outside the settings."""

from __future__ import annotations

from streamkit.config import (
    CREDENTIALS_FILE,
)

GENERATOR = "python -m stacktools.config_reference"


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
        "KAFKA_SERVERS",
        "docker compose",
        "the Kafka nodes the containers bootstrap from (kafka:19092; with the `cluster` profile "
        "all three)",
    ),
    ("KAFKA_2_PORT", "docker compose", "host port of the `cluster` profile's node 2 (9094)"),
    ("KAFKA_3_PORT", "docker compose", "host port of the `cluster` profile's node 3 (9096)"),
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
    ("JOIN_KILL_ROUNDS", "tests", "kill rounds of the Spark join fault test (4)"),
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
    ("FUZZ_JOBS", "tests", "fuzz targets at once in tests/fuzz (cores over the pytest workers)"),
    ("FLOOD_SECONDS", "tests", "seconds of the MQTT flood in tests/mqtt_bridge/test_flood.py (30)"),
)


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

- **duration**: `500ms`, `10s`, `1m`, `2h`, `7d` (a bare number is seconds); where the meaning says
  so, `0` or `off` for none. Held as a `timedelta`.
- **duration** that was a number of one unit: see *Renamed durations* below.
- **size**: bytes, or `64k`, `1m`, `2g` (binary multiples, as the JVM and Spark read them).
- **secret**: a password; held as `streamkit.secret.Secret`, whose `repr` and `str` are `***`,
  so a settings object in a log line or a traceback shows no password.
- **a choice** (`a \\| b`): one of the values listed.

## Renamed durations

Some durations were numbers of one unit, named with it (`JOIN_MAX_GAP_MS=5000`); they are
durations now, named without it (`JOIN_MAX_GAP=5s`), their options too (`--max-gap 5s`). For
one release, so that an existing `.env` or script keeps its meaning:

- the old variable and option are still read (`JOIN_MAX_GAP_MS`, `--max-gap-ms`; the new
  variable wins when both are set);
- a bare number, under either name, still counts in the old unit;

and each such value is logged at start-up as a warning (logger `streamkit.config`, field
`setting`) that names the setting and its new spelling. The next release reads neither. Each
such setting's meaning below names its old variable and unit.

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
