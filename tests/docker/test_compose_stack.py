"""docker-compose.yml for real: the whole stack in containers (built images of its own, stand-ins
of the official ones where no registry is reachable), in two shapes: as a user gets it by
default (one Kafka node, the shared machine user), and on its `cluster` profile (three Kafka
nodes, three replicas, two in sync) with an identity per machine. In each the sample is replayed
through it while the bridge's, the Spark job's and the connector's containers are SIGKILLed and
Kafka restarts (on the cluster: one node's container SIGKILLed, another restarted), and InfluxDB
and the committed Kafka outputs are compared with the oracles, values included.

Runs wherever podman or a Docker engine is (scripts/setup-containers.sh installs podman); it
fails rather than skips when the engine cannot be started, so CI cannot pass without it."""

from __future__ import annotations

import json
import os
import shutil
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from confluent_kafka import Producer

from stacktools.compose import engine as container_engine
from stacktools.compose.env import CLUSTER_SERVERS
from stacktools.dashboards import prometheus_api
from stacktools.stack import certs
from stacktools.stack.influx import InfluxClient
from stacktools.stack.settings import Settings
from streamkit.kafka_clients import client_config
from streamkit.mqtt_client import connect, make_client
from streamkit.paths import REPO_ROOT
from streamkit.secret import Secret
from streamkit.wire import AvroCodec, overload_key
from streamkit.wire.retention import source
from tests.oracles.join import parse_pairs
from tests.oracles.pipeline import PipelineSpec, default_stats
from tests.oracles.rows import event_time_order, file_rows, measurements
from tests.oracles.windows import Spec
from tests.support import server_checks as checks
from tests.support.cmdline_watch import CommandLineWatch
from tests.support.compose import (
    ALERT_SERVICES,
    CLUSTER_NODES,
    KEEP_FOREVER,
    ONE_SHOT,
    PIPELINE_SERVICES,
    SERVER_SERVICES,
    ComposeProject,
    build_images,
    free_published_ports,
    healthcheck_bound_s,
)
from tests.support.exactness import assert_pipeline_exact
from tests.support.waits import settle

pytestmark = pytest.mark.containers

SAMPLE = REPO_ROOT / "tests" / "data" / "test_events.json"
DATABASE = "machinedata"
#: The single pass's default windows (spark_jobs.config): tumbling 10 s, 10 s allowed lateness.
WINDOWS, LATENESS_MS = [Spec("tumbling", 10_000, 10_000)], 10_000
#: The compose stack's join (JOIN_PAIRS's default) and windows, for the oracle.
COMPOSE_PIPELINE = PipelineSpec(
    pairs=tuple(parse_pairs("actSpeed_*:vaTorque_*:mechanical_power")),
    windows=tuple(WINDOWS),
    lateness_ms=LATENESS_MS,
    stats=default_stats(),
)
#: Rows per second of the faulted replay: slow enough that every fault lands while records are in
#: flight.
REPLAY_RATE = 250
#: The second replay: the same machines a month later (the sample spans ten days).
SHIFT_MS = 30 * 24 * 3600 * 1000
TOPICS = {
    "raw": "machinedata.raw",
    "joined": "machinedata.joined",
    "aggregates": "machinedata.aggregates",
    "late": "machinedata.late",
}
#: A component's overload alert as the single pass writes it (schemas/overload.avsc).
OVERLOAD = {
    "thing": "ComposeM1",
    "component": "C12",
    "rating_id": "r1",
    "status": "firing",
    "since_ms": 600_000,
    "cycle_start_ms": 600_000,
    "cycle_end_ms": 1_200_000,
    "why": "duty",
    "duty_pct": 90.0,
    "duty_rating_pct": 40.0,
    "overload_ms": 0,
    "peak_w": 18_000.0,
    "rated_power_kw": 20.0,
}
#: (seconds into the replay, what): each service's processes SIGKILLed as a crash would; one Kafka
#: node's container SIGKILLed and started again later, another restarted meanwhile, so that for a
#: while one node alone is up and writes wait for a second in sync. A service's crash is not
#: `docker compose kill`: podman takes that for a user's stop and applies no restart policy,
#: where the crash must be brought back by the policy alone. A node's is (its java is the
#: container's first process, which a signal from inside cannot end), so it is started again.
CLUSTER_FAULTS = (
    (3.0, "kill", "kafka-2"),
    (5.0, "crash", "mqtt-bridge"),
    (8.0, "crash", "spark-single-pass"),
    (11.0, "restart", "kafka-3"),
    (14.0, "crash", "db-connector"),
    (30.0, "start", "kafka-2"),
)
#: The default shape's: the same crashes, and its one Kafka node restarted.
ONE_NODE_FAULTS = (
    (4.0, "crash", "mqtt-bridge"),
    (8.0, "crash", "spark-single-pass"),
    (12.0, "crash", "db-connector"),
    (15.0, "restart", "kafka"),
)


@dataclass(frozen=True)
class Shape:
    """How the compose stack is run: what a user gets by default (one Kafka node, the shared
    machine user), or the `cluster` profile with an identity per machine."""

    name: str
    env: dict[str, str]
    kafka: tuple[str, ...]
    faults: tuple[tuple[float, str, str], ...]
    identities: bool


SHAPES = (
    Shape("default", {}, ("kafka",), ONE_NODE_FAULTS, identities=False),
    Shape(
        "cluster",
        # the three lines docs/scaling.md tells users to put into .env, and an identity each
        {
            "COMPOSE_PROFILES": "cluster",
            "KAFKA_BROKERS": "3",
            "KAFKA_SERVERS": CLUSTER_SERVERS,
            "MQTT_MACHINE_IDENTITIES": "true",
        },
        ("kafka", *CLUSTER_NODES),
        CLUSTER_FAULTS,
        identities=True,
    ),
)


@pytest.fixture(scope="module")
def command_lines() -> Iterator[CommandLineWatch]:
    """Every command line on the host from before `up` to the end of the module: the
    containers' processes are the host's, their healthchecks and entry points' tools too."""
    with CommandLineWatch() as watch:
        yield watch


@pytest.fixture(scope="module", params=SHAPES, ids=[shape.name for shape in SHAPES])
def shape(request: pytest.FixtureRequest) -> Shape:
    return request.param


@pytest.fixture(scope="module")
def project(
    shape: Shape, tmp_path_factory: pytest.TempPathFactory, command_lines: CommandLineWatch
) -> Iterator[ComposeProject]:
    build_images()
    container_engine.start()
    work = tmp_path_factory.mktemp(f"compose-{shape.name}")
    compose = ComposeProject(
        f"mdtest{os.getpid()}{shape.name}",
        work,
        free_published_ports(),
        # file times; windows closed by the data alone, as the oracle closes them (an
        # idle flush between the rounds would close them by the wall clock)
        {"REPLAY_LIVE": "false", "AGGREGATE_IDLE_TIMEOUT": "off", **KEEP_FOREVER, **shape.env},
    )
    files = [REPO_ROOT / "data" / f"compose-test-{os.getpid()}-{n}.json" for n in (1, 2)]
    shutil.copyfile(SAMPLE, files[0])
    files[1].write_text(shifted(SAMPLE.read_text(), SHIFT_MS))
    compose.events = files
    try:
        compose.run("build", timeout_s=2400)
        if shape.identities:
            # a user for each Thing of the sample (the second file has the same), as a user
            # makes them: before `up`, whose config job writes them into Mosquitto's passwords
            compose.run(*MACHINE_USER, "--events", f"/data/{files[0].name}", timeout_s=300)
        nodes = tuple(node for node in shape.kafka if node != "kafka")
        services = (*SERVER_SERVICES, *nodes, *PIPELINE_SERVICES, *ALERT_SERVICES)
        compose.run("up", "-d", *services, *ONE_SHOT, timeout_s=900)
        compose.wait_ready(services, ONE_SHOT, timeout_s=600)
        yield compose
    finally:
        compose.down()
        for file in files:
            file.unlink(missing_ok=True)


#: `stack machine-user` in the config job's container, as docs/containers.md gives it.
MACHINE_USER = (
    "run",
    "--rm",
    "-T",
    "--no-deps",
    "config",
    *"python -m stacktools.stack machine-user".split(),
)


def shifted(events: str, shift_ms: int) -> str:
    """The same machines later: every row's time moved by ``shift_ms``, row ids made new."""
    rows = [json.loads(line) for line in events.splitlines() if line.strip()]
    for row in rows:
        row["Timestamp"] += shift_ms
        row["id"] = f"{row['id']}-later"
    return "".join(json.dumps(row) + "\n" for row in rows)


def inject(compose: ComposeProject, action: str, service: str) -> None:
    if action == "crash":  # every process of the container but its init, which then exits with it
        compose.run("exec", "-T", service, "sh", "-c", "kill -9 -1", check=False, timeout_s=60)
    elif action == "kill":
        compose.run("kill", "-s", "KILL", service, timeout_s=120)
    elif action == "start":
        compose.run("start", service, timeout_s=300)
    else:
        compose.run(action, "--no-deps", service, timeout_s=300)


def replay(compose: ComposeProject, events: Path, rate: int, faults: tuple = ()) -> list[str]:
    """`docker compose --profile replay up simulator` on ``events``, the faults at their times;
    until the simulator has exited 0."""
    # --no-deps: podman's API makes Compose recreate every running service an `up` names (its
    # divergence check; not so with Docker), and the replay must not restart the pipeline.
    compose.run("--profile", "replay", "rm", "--force", "--stop", "simulator", timeout_s=120)
    compose.run(
        "--profile",
        "replay",
        "up",
        "-d",
        "--no-deps",
        "simulator",
        timeout_s=300,
        env={"EVENTS_FILE": events.name, "REPLAY_RATE": str(rate)},
    )
    started, done = time.monotonic(), []
    for at_s, action, service in faults:
        time.sleep(max(0.0, started + at_s - time.monotonic()))
        inject(compose, action, service)
        done.append(f"{action} {service} at {time.monotonic() - started:.1f} s")
    settle(
        lambda: compose.states().get("simulator", {}).get("State") == "exited", 600, "the replay"
    )
    assert compose.states()["simulator"]["ExitCode"] == 0, (
        compose.logs("simulator") + compose.logs("mosquitto")[-6000:]
    )
    return done


def assert_equals_the_oracle(settings: Settings, files: list[Path]) -> str:
    """The committed Kafka outputs and InfluxDB against the oracles of everything replayed so far
    (the pairs from the files' rows; the windows and late records from what the raw topic holds,
    in its order), value for value: nothing missing, extra, duplicated or different."""
    records = measurements([row for file in files for row in event_time_order(file_rows(file))])
    summary = assert_pipeline_exact(
        settings, TOPICS, DATABASE, COMPOSE_PIPELINE, records, timeout_s=900
    )
    assert not InfluxClient(settings).rows(DATABASE, f"SELECT * FROM {source('dead_letter')}")
    return summary


def test_compose_replay_equals_the_oracle(project: ComposeProject, tmp_path: Path) -> None:
    """The sample through the compose stack: what the local stack gives, by value."""
    files = project.events[:1]
    replay(project, files[0], rate=1000)
    settings = project.host_settings(tmp_path)
    print(assert_equals_the_oracle(settings, files))
    counts = {
        name: len(InfluxClient(settings).rows(DATABASE, f"SELECT * FROM {source(name)}"))
        for name in ("raw", "joined", "aggregate", "late")
    }
    assert counts == {"raw": 19_825, "joined": 7_548, "aggregate": 5_812, "late": 0}, counts


def test_compose_replay_with_killed_containers_still_equals_the_oracle(
    project: ComposeProject, shape: Shape, tmp_path: Path
) -> None:
    """The same machines a month later, while the bridge's, the Spark job's and the connector's
    containers crash (restart policies alone bring them back), one Kafka node is SIGKILLed and
    another restarts."""
    files = project.events
    faults = replay(project, files[1], rate=REPLAY_RATE, faults=shape.faults)
    states = project.states()
    running = (*PIPELINE_SERVICES, *shape.kafka)
    assert all(states[name]["State"] == "running" for name in running), (faults, states)
    restarts = {name: project.restart_count(name) for name in PIPELINE_SERVICES}
    assert all(restarts.values()), f"a crash was not restarted by the policy: {restarts} ({faults})"
    # a restarted node serves once its healthcheck passes; then its published port must answer
    # the host (refused for 15 minutes once in CI under podman 4.3, docs/containers.md): named
    # at once, not after the oracle's wait
    project.wait_ready(shape.kafka, timeout_s=max(map(healthcheck_bound_s, shape.kafka)))
    assert not (lost := project.unreachable_ports(shape.kafka, 9092)), (
        f"a Kafka node's published port is refused from the host: {lost}"
    )
    print(assert_equals_the_oracle(project.host_settings(tmp_path), files))


def test_a_placeholder_password_is_refused_naming_the_variable(project: ComposeProject) -> None:
    """The provisioning job, run with the .env.example placeholder for one password."""
    name = f"{project.name}-placeholder-check"
    done = project.run(
        "run",
        "--name",
        name,
        "--no-deps",
        "-e",
        "KAFKA_BRIDGE_PASSWORD=change-me",
        "provision",
        check=False,
        timeout_s=300,
    )
    try:
        # The container's own exit code: podman's API may report a finished `run` as 0.
        status, body = container_engine.api("GET", f"/containers/{name}/json")
        assert status == 200 and json.loads(body)["State"]["ExitCode"] != 0, body[:500]
    finally:
        container_engine.api("DELETE", f"/containers/{name}?force=true")
    assert "KAFKA_BRIDGE_PASSWORD is still the placeholder 'change-me'" in done.stdout + done.stderr


def test_the_servers_refuse_strangers_and_prometheus_scrapes_every_service(
    project: ComposeProject, tmp_path: Path
) -> None:
    """The same server checks as the local stack's, on the compose stack's published ports:
    TLS only with the certs job's CA (another CA and plaintext refused), Kafka transactions,
    MQTT and InfluxDB refusing anonymous and wrong credentials; and
    Prometheus scraping every running service of ours by its compose name, the disk reporter's
    free space of the data volumes included."""
    settings = project.host_settings(tmp_path)
    stranger_ca = certs.ensure(Settings.from_sources(environ={"STACK_RUN_DIR": str(tmp_path)})).ca
    checks.check_tls_only(settings, stranger_ca)
    checks.check_transactions(settings)
    checks.check_mqtt_auth(settings)
    checks.check_influx_write_read(settings)

    def scraped() -> set[str]:
        return {
            t["labels"]["job"] for t in checks.prometheus_targets(settings) if t["health"] == "up"
        }

    ours = {"mqtt_bridge", "db_connector", "spark_single_pass", "disk_space", "alert_forwarder"}
    settle(lambda: ours <= scraped(), 60, "targets up", interval_s=2)
    assert {"prometheus", "alertmanager", *ours} <= scraped()
    # the disk alert's inputs, through Prometheus: the free space of the Kafka and InfluxDB data
    # volumes, labelled as the local stack labels them
    free = prometheus_api.instant(settings, "data_dir_free_bytes / data_dir_filesystem_bytes")
    shares = {labels["dir"]: share for labels, share in free}
    assert shares.keys() == {"kafka", "influxdb"} and all(0 < s <= 1 for s in shares.values()), free
    assert all(labels["service"] == "disk_space" for labels, _ in free), free
    # the shipped alert rules are loaded, and their alerts go to the alertmanager service
    rules = prometheus_api.call(settings, "/api/v1/rules")
    names = {rule["name"] for group in rules["groups"] for rule in group["rules"]}
    assert {"ServiceDown", "DeadLetters", "BridgeMqttDisconnected"} <= names, names
    managers = prometheus_api.call(settings, "/api/v1/alertmanagers")
    assert [m["url"] for m in managers["activeAlertmanagers"]] == [
        "http://alertmanager:9093/api/v2/alerts"
    ], managers


def test_each_machine_publishes_only_as_itself_or_all_as_the_shared_user(
    project: ComposeProject, shape: Shape, tmp_path: Path
) -> None:
    """After the replays. With MQTT_MACHINE_IDENTITIES (every Thing replayed as itself): a
    machine user is refused another Thing's topic and the shared `machine` user is gone; the
    passwords are read as the simulator reads them, from the `machines` volume. Without (the
    default): the shared user publishes under the prefix."""
    settings = project.host_settings(tmp_path)
    if not shape.identities:
        # the password compose's machines publish with (.env), as the simulator's container has it
        password = Secret(project.values["MQTT_MACHINE_PASSWORD"])
        shared = replace(settings, mqtt_username="machine", mqtt_password=password)
        client = make_client(shared, client_id="compose-shared-machine")
        connect(client, shared)
        try:
            topic = f"{shared.mqtt_topic_prefix}/ComposeM1"
            assert checks.publish_reasons(client, [(topic, b"{}")]) == ["Success"]
        finally:
            client.disconnect()
            client.loop_stop()
        return
    done = project.run(
        "run",
        "--rm",
        "--no-deps",
        "config",
        "cat",
        "/machines/machine-credentials.json",
        timeout_s=120,
    )
    machines = json.loads(done.stdout)
    assert len(machines) >= 2, machines
    checks.check_machine_identities(settings, machines)


def test_an_overload_event_reaches_the_alertmanager_service_and_its_resolve_ends_it(
    project: ComposeProject, tmp_path: Path
) -> None:
    """The compose wiring of the overload alerts (after the replays: the event is none of the
    sample's): an event in the overloads topic, as the single pass commits it, is posted by the
    alert-forwarder container (its own Kafka user, the alertmanager service by name) and shows
    in the alertmanager service's API with its labels; its resolve ends it there."""
    settings = project.host_settings(tmp_path)
    url = (
        f"http://127.0.0.1:{project.ports['ALERTMANAGER_PORT']}/api/v2/alerts"
        "?filter=alertname%3D%22ComponentOverload%22&filter=thing%3D%22ComposeM1%22"
    )

    def alerts() -> list[dict]:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return json.loads(answer.read())

    producer = Producer(client_config(settings, "compose-test-overloads"))
    codec = AvroCodec("overload")
    for event in (OVERLOAD, {**OVERLOAD, "status": "resolved", "cycle_start_ms": 1_200_000}):
        producer.produce(
            settings.overloads_topic, codec.encode(event), overload_key("ComposeM1", "C12")
        )
        assert producer.flush(30) == 0
        if event["status"] == "firing":
            settle(lambda: bool(alerts()), 120, "the alert in Alertmanager", interval_s=2)
            (fired,) = alerts()
            assert fired["labels"]["component"] == "C12" and fired["status"]["state"] == "active"
    settle(lambda: not alerts(), 120, "the alert resolved", interval_s=2)


def test_no_password_on_any_command_line_of_the_host(
    project: ComposeProject, command_lines: CommandLineWatch
) -> None:
    """Through `up`, both replays, the crashes and Kafka's restart (the tests above, run first):
    no command line of any process of the host (containers, healthchecks, entry points' tools)
    held a password of .env."""
    command_lines.look_once_more()
    passwords = {key: value for key, value in project.values.items() if key.endswith("_PASSWORD")}
    assert len(passwords) >= 12 and all(len(v) >= 12 for v in passwords.values()), passwords.keys()
    assert any(b"mosquitto" in line for line in command_lines.seen), "the containers were not seen"
    assert command_lines.leaks(passwords) == []
