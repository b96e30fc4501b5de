"""The defaults never collide: every port the launcher's servers take (three Kafka nodes with
their controllers, the optional Spark cluster's masters and workers and their UIs, InfluxDB and
its RPC port, the schema registry, Alertmanager, Prometheus) and every service's
/metrics port are distinct, so any combination of them starts on one machine."""

from __future__ import annotations

import collections
import dataclasses

from stacktools.harness.services import SERVICES
from stacktools.stack.servers import DEFAULT_GROUPS, OPTIONAL_GROUPS
from stacktools.stack.settings import Settings


def test_no_two_default_ports_are_the_same(tmp_path) -> None:  # noqa: ANN001
    settings = dataclasses.replace(
        Settings.from_sources(environ={"STACK_RUN_DIR": str(tmp_path)}),
        kafka_brokers=3,
        schema_registry=True,
    )
    taken: list[tuple[int, str]] = []
    for make in (*DEFAULT_GROUPS.values(), *OPTIONAL_GROUPS.values()):
        for component in make(settings):
            taken += [(port, component.name) for port in component.ports]
    taken += [(spec.metrics_port, f"{name} /metrics") for name, spec in SERVICES.items()]
    owners = collections.defaultdict(list)
    for port, owner in taken:
        owners[port].append(owner)
    assert len(owners) > 15, owners  # the servers were all seen
    clashes = {port: names for port, names in owners.items() if len(names) > 1}
    assert clashes == {}, clashes
