"""Session fixtures: the real local stack, started once through the project's own launcher.

A stack that is already running (``python -m stacktools.stack up``) is reused and left running;
one that this test session started is stopped at the end, so CI leaves nothing behind.
Set STACK_KEEP=1 to keep it running after the tests.

scripts/test.sh runs the suite on two pytest-xdist workers (``--dist loadgroup``): every test
on the shared local stack is in one group and so runs on one worker, one after another as
without xdist (they share the stack's servers, and some kill, pause or restart them); the rest
(the algorithms, the fuzzers, and the tests that start servers, a Spark job or containers of
their own, on free ports) run on the other worker meanwhile.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence

import pytest
from _pytest.nodeid import NodeId

from stacktools.stack import Stack
from stacktools.stack.servers.spark import spark_master_url
from stacktools.stack.settings import Settings
from streamkit.config import CREDENTIALS_FILE
from tests.support.topology import Topology

#: The fixtures of the shared local stack: a test that asks for one is in the stack's group.
SHARED_STACK_FIXTURES = frozenset(
    {"stack_settings", "spark_cluster", "replicated_stack", "topology"}
)
#: The xdist group of every test on the shared stack.
STACK_GROUP = "local-stack"


def on_the_shared_stack(item: pytest.Item) -> bool:
    """Whether a test uses the shared local stack: it asks for one of its fixtures. A test that
    starts servers of its own (on free ports, in its own run directory) is not one of them."""
    return bool(set(getattr(item, "fixturenames", ())) & SHARED_STACK_FIXTURES)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: Sequence[pytest.Item]) -> None:
    """Under ``--dist loadgroup`` one worker takes the shared stack's tests, in their order.
    xdist 3.8 groups a test by the ``@<group>`` its worker appends to the test's id, through an
    attribute pytest 9 no longer reads; the id is extended here, through the one it reads."""
    if not config.getoption("loadgroup", default=False):
        return
    for item in items:
        if on_the_shared_stack(item):
            item._id = NodeId.parse(f"{item.nodeid}@{STACK_GROUP}")


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
