"""Session fixtures: the real local stack, started once through the project's own launcher.

A stack that is already running (``python -m stacktools.stack up``) is reused and left running;
one that this test session started is stopped at the end, so CI leaves nothing behind.
Set STACK_KEEP=1 to keep it running after the tests.

scripts/test.sh runs the suite on two pytest-xdist workers (``--dist loadgroup``), and each
worker has a stack of its own: the first the usual one, every other one in
``<run dir>/workers/<worker>`` on the usual ports + 5,000 per worker (its environment says so,
so every setting, command and stage a test starts finds that worker's stack). A module's tests
run on one worker (they may share a module fixture), and the tests on the Spark cluster and
the replicated stack all on one (those servers are started once). Modules go out longest
first: the chaos, containers and Spark tiers, then the other server tests, then the rest.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from _pytest.nodeid import NodeId

from stacktools.stack import Stack
from stacktools.stack.servers.spark import spark_master_url
from stacktools.stack.settings import Settings
from streamkit.config import CREDENTIALS_FILE
from tests.support.topology import Topology

#: Each further worker's stack runs on the usual ports + this times the worker's number.
WORKER_PORT_OFFSET = 5_000
#: The settings of the ports a stack listens on (the rest derive from these).
STACK_PORTS = (
    "KAFKA_PORT",
    "KAFKA_CONTROLLER_PORT",
    "SCHEMA_REGISTRY_PORT",
    "MQTT_PORT",
    "INFLUX_PORT",
    "PROMETHEUS_PORT",
    "ALERTMANAGER_PORT",
    "SPARK_MASTER_PORT",
    "SPARK_MASTER_UI_PORT",
)
#: The fixtures of the servers started once per session beside the stack: a test that asks for
#: one is in the cluster's group.
CLUSTER_FIXTURES = frozenset({"spark_cluster", "replicated_stack"})
CLUSTER_PARAMS = frozenset({("topology", "scaled-out"), ("master", "cluster")})
CLUSTER_GROUP = "spark-cluster"
#: Tiers by how long their modules take, longest first; a module goes out with its longest.
LONGEST_FIRST = ("chaos", "containers", "spark", "stack")


def worker_number() -> int:
    """0 without pytest-xdist and on its first worker (gw0), N on worker gwN."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    return int(worker.removeprefix("gw"))


def pytest_configure(config: pytest.Config) -> None:
    """On a further worker, point the environment at that worker's own stack before any test
    reads it: its run directory and its ports."""
    number = worker_number()
    if number == 0:
        return
    usual = Settings.from_sources()
    os.environ["STACK_RUN_DIR"] = str(usual.run_dir / "workers" / f"gw{number}")
    for name in STACK_PORTS:  # each setting's field is its name in lower case
        os.environ[name] = str(getattr(usual, name.lower()) + WORKER_PORT_OFFSET * number)


def on_the_cluster(item: pytest.Item) -> bool:
    """Whether a test uses the Spark cluster or the replicated stack: it asks for one, or takes
    it through a parameter (a whole-pipeline test's ``topology``, a Spark job's ``master``)."""
    if set(getattr(item, "fixturenames", ())) & CLUSTER_FIXTURES:
        return True
    params = getattr(getattr(item, "callspec", None), "params", {})
    return any(params.get(name) == value for name, value in CLUSTER_PARAMS)


def module_of(item: pytest.Item) -> str:
    """The test's file, as its id names it."""
    return item.nodeid.split("::")[0]


def tier_rank(item: pytest.Item) -> int:
    names = {mark.name for mark in item.iter_markers()}
    return next(
        (rank for rank, tier in enumerate(LONGEST_FIRST) if tier in names), len(LONGEST_FIRST)
    )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``--dist loadgroup``: each test's group is its module, or the cluster's; modules
    longest first (xdist then keeps the collection's order). xdist 3.8 groups a test by the
    ``@<group>`` its worker appends to the test's id, through an attribute pytest 9 no longer
    reads; the id is extended here, through the one it reads."""
    if not config.getoption("loadgroup", default=False):
        return
    module_rank: dict[str, int] = {}
    for item in items:
        module = module_of(item)
        module_rank[module] = min(module_rank.get(module, len(LONGEST_FIRST)), tier_rank(item))
    order = {id(item): index for index, item in enumerate(items)}
    items.sort(key=lambda i: (module_rank[module_of(i)], order[id(i)]))
    for item in items:
        group = CLUSTER_GROUP if on_the_cluster(item) else module_of(item)
        item._id = NodeId.parse(f"{item.nodeid}@{group}")


def keep_started_servers() -> bool:
    """STACK_KEEP=1: leave what a test session started running afterwards."""
    return os.environ.get("STACK_KEEP", "") in {"1", "true", "yes"}


@pytest.fixture(scope="session")
def stack_settings() -> Iterator[Settings]:
    settings = Settings.from_sources()
    stack = Stack(settings)
    was_running = all(s.state in {"running", "external"} for s in stack.status())
    yield stack.up()
    if not was_running and not keep_started_servers():
        stack.down()


@pytest.fixture
def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def spark_cluster(stack_settings: Settings) -> Iterator[str]:
    """The launcher's Spark standalone cluster (``up spark``) for this session: its master URL.
    One that runs already is reused and left running; one started here is stopped at the end."""
    cluster = Stack(stack_settings, ["spark"])
    was_running = all(s.state == "running" for s in cluster.status())
    settings = cluster.up()
    yield spark_master_url(settings)
    if not was_running and not keep_started_servers():
        cluster.down()


#: The replicated stack's ports: the main stack's + this, so that both run side by side.
REPLICATED_PORT_OFFSET = 10_000


def replicated_ports(settings: Settings) -> dict[str, str]:
    ports = {
        "KAFKA_PORT": settings.kafka_port,
        "KAFKA_CONTROLLER_PORT": settings.kafka_controller_port,
        "MQTT_PORT": settings.mqtt_port,
        "INFLUX_PORT": settings.influx_port,
        "PROMETHEUS_PORT": settings.prometheus_port,
    }
    return {name: str(port + REPLICATED_PORT_OFFSET) for name, port in ports.items()}


@pytest.fixture(scope="session")
def replicated_stack(stack_settings: Settings, spark_cluster: str) -> Iterator[Settings]:
    """A second stack next to the main one (run dir ``<run dir>/replicated``, its ports + 10,000)
    with three Kafka nodes (KAFKA_BROKERS=3: replication factor 3, min.insync.replicas 2),
    Mosquitto, InfluxDB and Prometheus, for pipelines on the session's Spark cluster: its run dir
    gets the cluster's secret, so that jobs started with these settings can join it. Reused and left
    running as ``stack_settings`` is."""
    run_dir = stack_settings.run_dir / "replicated"
    credentials = run_dir / CREDENTIALS_FILE
    run_dir.mkdir(parents=True, exist_ok=True)
    credentials.touch(mode=0o600)
    kept = [
        line
        for line in credentials.read_text().splitlines(keepends=True)
        if not line.startswith("SPARK_CLUSTER_PASSWORD=")
    ]
    credentials.write_text(
        "".join(kept)
        + f"SPARK_CLUSTER_PASSWORD={stack_settings.credential('spark', 'cluster').reveal()}\n"
    )
    environ = {
        **os.environ,
        **replicated_ports(stack_settings),
        "STACK_RUN_DIR": str(run_dir),
        "KAFKA_BROKERS": "3",
    }
    stack = Stack(Settings.from_sources(environ), ["kafka", "mosquitto", "influxdb", "prometheus"])
    was_running = all(s.state == "running" for s in stack.status())
    yield stack.up()
    if not was_running and not keep_started_servers():
        stack.down()


@pytest.fixture(params=["local", "scaled-out"])
def topology(request: pytest.FixtureRequest, stack_settings: Settings) -> Topology:
    """Each whole-pipeline test that asks for it runs twice: on the main stack, and scaled out
    (the Spark cluster with the executors' sink, two sharded bridges, three Kafka nodes)."""
    if request.param == "local":
        return Topology("local", stack_settings)
    master = request.getfixturevalue("spark_cluster")
    return Topology(
        "scaled-out",
        request.getfixturevalue("replicated_stack"),
        {"SPARK_MASTER": master, "SPARK_SINK": "executors"},
        bridges=2,
        spark=Stack(stack_settings, ["spark"]),
    )
