"""The servers of the local stack, one module each, and the table of the groups ``up`` starts.

Each writes its generated configuration under ``<run dir>/<name>/``, its data under
``<run dir>/data/<name>/`` and its log to ``<run dir>/logs/<name>.log``. Everything binds to
127.0.0.1 only. What they share (the base class, the HTTP probes) is in :mod:`.base`.
"""

from __future__ import annotations

from collections.abc import Callable

from stacktools.stack.servers.alertmanager import Alertmanager
from stacktools.stack.servers.base import Component
from stacktools.stack.servers.disk_space import DiskSpace
from stacktools.stack.servers.influxdb import InfluxDB
from stacktools.stack.servers.kafka import kafka_nodes
from stacktools.stack.servers.mosquitto import Mosquitto
from stacktools.stack.servers.prometheus import Prometheus
from stacktools.stack.servers.registry import schema_registry
from stacktools.stack.servers.spark import spark_cluster
from stacktools.stack.settings import Settings


def single(component: type[Component]) -> Callable[[Settings], list[Component]]:
    return lambda settings: [component(settings)]


#: The servers ``up`` starts by default, by group, in start order (``kafka``: KAFKA_BROKERS nodes).
DEFAULT_GROUPS: dict[str, Callable[[Settings], list[Component]]] = {
    "kafka": kafka_nodes,
    "mosquitto": single(Mosquitto),
    "influxdb": single(InfluxDB),
    "disk-space": single(DiskSpace),
    "alertmanager": single(Alertmanager),
    "prometheus": single(Prometheus),
    "schema-registry": schema_registry,  # none unless SCHEMA_REGISTRY is on
}
#: Started only when named (``up spark``): a Spark standalone master and SPARK_WORKERS workers.
OPTIONAL_GROUPS: dict[str, Callable[[Settings], list[Component]]] = {"spark": spark_cluster}
