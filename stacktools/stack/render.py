"""The compose stack's server configurations, rendered by the launcher's own components: compose's
one-shot ``config`` job runs ``python -m stacktools.stack render --into /config`` before any
server starts, so both stacks are configured from one place.

Each server's files go into ``<into>/<server>/``, the named volume compose mounts there and,
read-only, in that server's container alone: every file 0600 in a 0700 directory, owned by the
user the server's image runs as (some hold passwords). Every password is checked by the rules
of :mod:`stacktools.compose.credentials` first: a placeholder, short or malformed one stops the
job, naming it, before anything is written.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from stacktools.stack.access import refused_passwords
from stacktools.stack.certs import (
    KAFKA_IMAGE_UID,
    MOSQUITTO_IMAGE_UID,
    MOSQUITTO_KEY,
    REGISTRY_IMAGE_UID,
    REGISTRY_KEY,
    TlsFiles,
    replace_file,
)
from stacktools.stack.errors import LauncherError
from stacktools.stack.servers.alertmanager import Alertmanager
from stacktools.stack.servers.base import Component
from stacktools.stack.servers.influxdb import InfluxDB
from stacktools.stack.servers.kafka import Kafka
from stacktools.stack.servers.mosquitto import Mosquitto
from stacktools.stack.servers.prometheus import Prometheus
from stacktools.stack.servers.registry import SchemaRegistry
from stacktools.stack.servers.site import Site
from stacktools.stack.servers.spark import SparkMaster
from stacktools.stack.settings import Settings

#: Where compose's ``tls`` volume is mounted (stacktools.stack.certs --publish fills it).
COMPOSE_TLS_DIR = Path("/tls")
#: The ``nobody`` of the prom/* images (busybox).
NOBODY = 65534
#: The user our image runs as (the Dockerfile's APP_UID): the simulator, which logs in as each
#: machine with MQTT_MACHINE_IDENTITIES, reads the machine users' passwords.
APP_IMAGE_UID = 185


@dataclass(frozen=True)
class ComposeServer:
    """A server of the compose stack: its components (Kafka: one per node), where its container
    mounts its configuration volume and keeps its data, and the user its image runs as."""

    components: Callable[[Settings, ComposeCluster], list[Component]]
    conf_dir: Path
    data_dir: Path
    owner: int
    #: Its copy of the server key in the published directory (each owned by its user).
    key: str = "server-key.pem"
    #: Whether each component (a cluster's node) has a directory of its own, named as it.
    per_node: bool = False
    #: The compose services that mount its volume, when not just the one of its name.
    readers: tuple[str, ...] = ()

    def site(self, component: Component) -> Site:
        conf_dir = self.conf_dir / component.name if self.per_node else self.conf_dir
        tls = TlsFiles(
            ca=COMPOSE_TLS_DIR / "ca.pem",
            server_cert=COMPOSE_TLS_DIR / "server.pem",
            server_key=COMPOSE_TLS_DIR / self.key,
            server_keystore=COMPOSE_TLS_DIR / "kafka-keystore.pem",
        )
        return Site(conf_dir=conf_dir, data_dir=self.data_dir, tls=tls, in_compose=True)


@dataclass(frozen=True)
class ComposeCluster:
    """What compose alone knows of its Kafka nodes: the cluster id their storage is formatted
    with and the host port each node's client listener is published on, in node order."""

    cluster_id: str
    host_ports: tuple[int, ...] = ()


def _kafka_nodes(settings: Settings, cluster: ComposeCluster) -> list[Component]:
    if len(cluster.host_ports) < settings.kafka_brokers:
        raise LauncherError(
            f"KAFKA_BROKERS={settings.kafka_brokers}, but compose publishes "
            f"{len(cluster.host_ports)} Kafka port(s)"
        )
    return [
        Kafka(settings, node, cluster.cluster_id, cluster.host_ports[node - 1])
        for node in range(1, settings.kafka_brokers + 1)
    ]


def _one(component: type[Component]) -> Callable[[Settings, ComposeCluster], list[Component]]:
    return lambda settings, _cluster: [component(settings)]


#: Every server compose configures, by the name of its configuration volume's directory.
COMPOSE_SERVERS: dict[str, ComposeServer] = {
    "kafka": ComposeServer(
        _kafka_nodes,
        Path("/etc/kafka/machinedata"),
        Path("/var/lib/kafka/data"),
        KAFKA_IMAGE_UID,
        per_node=True,
        readers=("kafka", "kafka-2", "kafka-3"),
    ),
    "mosquitto": ComposeServer(
        _one(Mosquitto),
        Path("/mosquitto/config"),
        Path("/mosquitto/data"),
        MOSQUITTO_IMAGE_UID,
        key=MOSQUITTO_KEY,
    ),
    "influxdb": ComposeServer(
        _one(InfluxDB), Path("/etc/influxdb/machinedata"), Path("/var/lib/influxdb"), 0
    ),
    "prometheus": ComposeServer(
        _one(Prometheus), Path("/etc/prometheus"), Path("/prometheus"), NOBODY
    ),
    "alertmanager": ComposeServer(
        _one(Alertmanager), Path("/etc/alertmanager"), Path("/alertmanager"), NOBODY
    ),
    # the master's and every worker's (our image's user has the Spark images' uid, 185)
    "spark": ComposeServer(
        _one(SparkMaster),
        Path("/etc/spark"),
        Path("/opt/spark/work-dir"),
        APP_IMAGE_UID,
        readers=("spark-master", "spark-worker-1", "spark-worker-2"),
    ),
    # the `registry` profile's (rendered whatever the profiles: a few bytes)
    "schema-registry": ComposeServer(
        _one(SchemaRegistry),
        Path("/etc/apicurio"),
        Path("/var/lib/apicurio"),
        REGISTRY_IMAGE_UID,
        key=REGISTRY_KEY,
    ),
}

#: The passwords the servers' configurations hold (the other users' are provisioned later).
RENDERED_USERS = {
    "kafka": ("admin", "controller"),
    "mqtt": ("admin", "machine", "bridge"),
    "influx": ("admin",),
}


def render(settings: Settings, into: Path, cluster: ComposeCluster) -> list[Path]:
    """Every compose server's configuration under ``into``; the files written."""
    problems = refused_passwords(settings, RENDERED_USERS)
    if problems:
        listed = "\n  ".join(problems)
        raise LauncherError(f"refusing to configure the servers with these passwords:\n  {listed}")
    written = []
    for directory, server in COMPOSE_SERVERS.items():
        for component in server.components(settings, cluster):
            site = server.site(component)
            for name, content in component.config_files(site).items():
                target = into / directory / site.conf_dir.relative_to(server.conf_dir) / name
                _owned_directories(into / directory, target.parent, server.owner)
                replace_file(target, content, 0o600, server.owner)
                written.append(target)
    return written + _machine_credentials(settings)


def _machine_credentials(settings: Settings) -> list[Path]:
    """The machine users' passwords (``stack machine-user``, MQTT_MACHINE_IDENTITIES), 0600,
    handed to the simulator's user, who logs in as each of them."""
    path = settings.machine_credentials_path
    if not path.is_file():
        return []
    for each in (path.parent, path):
        if APP_IMAGE_UID != os.geteuid():
            os.chown(each, APP_IMAGE_UID, APP_IMAGE_UID)
    return [path]


def _owned_directories(top: Path, directory: Path, owner: int) -> None:
    """``directory`` and every one above it up to ``top`` (a volume's root) made, 0700 and
    ``owner``'s."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory
    while True:
        path.chmod(0o700)
        if owner != os.geteuid():
            os.chown(path, owner, owner)
        if path == top:
            return
        path = path.parent
