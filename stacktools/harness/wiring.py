"""Where the stages meet: topics, MQTT prefix, client ids, consumer group, database.

One idea for the demo, the benchmarks and the tests: the user's own names (``default``), a
run's own copy of the declared topics (``fresh``), or private names for a test that must not
see anybody else's data (``private``, optionally only the bridge's part).
"""

from __future__ import annotations

import dataclasses
import uuid

from stacktools.stack.access import TOPIC_RIGHTS
from stacktools.stack.influx import InfluxClient
from stacktools.stack.kafka_access import answers
from stacktools.stack.settings import Settings
from stacktools.stack.topics import TopicSpec, load_topic_specs, provision
from streamkit.kafka_clients import admin_client
from streamkit.wire import shard_prefix


@dataclasses.dataclass(frozen=True)
class Wiring:
    raw: str
    dlq: str
    prefix: str
    bridge_client_id: str
    joined: str = ""
    aggregates: str = ""
    late: str = ""
    markers: str = ""
    query_suffix: str = ""
    connector_group: str = ""
    database: str = ""
    opstats: str = ""
    overloads: str = ""

    @classmethod
    def default(cls, settings: Settings) -> Wiring:
        """The names a user's stack has (streamkit/wire/topics.yaml, the default database)."""
        return cls(
            settings.raw_topic,
            settings.dlq_topic,
            settings.mqtt_topic_prefix,
            "mqtt-bridge-1",
            settings.joined_topic,
            settings.aggregates_topic,
            settings.late_topic,
            "machinedata.commit-markers",
            "",
            "db-connector",
            settings.influx_database,
            settings.opstats_topic,
            settings.overloads_topic,
        )

    @classmethod
    def private(cls, settings: Settings, *, bridge_only: bool = False) -> Wiring:
        """Fresh test topics (``test.<role>.<tag>``), prefix, ids and database; ``bridge_only``:
        just the bridge's raw and dead-letter topics and its MQTT prefix."""
        tag = uuid.uuid4().hex[:10]
        declared = {s.name: s for s in load_topic_specs(settings)}
        specs = [
            dataclasses.replace(declared["machinedata.raw"], name=f"test.raw.{tag}"),
            dataclasses.replace(declared["machinedata.dlq"], name=f"test.dlq.{tag}"),
        ]
        provision(settings, specs)
        bridge = cls(
            specs[0].name,
            specs[1].name,
            f"{settings.mqtt_topic_prefix}/test-{tag}",
            f"bridge-{tag}",
        )
        if bridge_only:
            return bridge
        return dataclasses.replace(
            bridge,
            joined=private_topic(settings, "joined", 2),
            aggregates=private_topic(settings, "aggregates", 2),
            late=private_topic(settings, "late", 2),
            opstats=private_topic(settings, "opstats", 2),
            overloads=private_topic(settings, "overloads", 2, compact=True),
            markers=private_topic(settings, "markers", 1, compact=True),
            query_suffix=f"-{bridge.prefix}",
            connector_group=f"db-connector-{bridge.prefix}",
            database=private_database(settings),
        )

    @classmethod
    def fresh(cls, settings: Settings, label: str) -> Wiring:
        """A run of its own with the declared topic settings (streamkit/wire/topics.yaml) under
        names ``<topic>.<label>-<id>``, e.g. for a demo run that must not mix with earlier ones."""
        tag = f"{label}-{uuid.uuid4().hex[:6]}"
        specs = {
            s.name: dataclasses.replace(s, name=f"{s.name}.{tag}")
            for s in load_topic_specs(settings)
        }
        provision(settings, list(specs.values()))
        names = {name.removeprefix("machinedata."): spec.name for name, spec in specs.items()}
        database = tag.replace("-", "_")
        InfluxClient(settings).create_scratch_database(database)
        return cls(
            names["raw"],
            names["dlq"],
            f"{settings.mqtt_topic_prefix}/{tag}",
            f"bridge-{tag}",
            names["joined"],
            names["aggregates"],
            names["late"],
            names["commit-markers"],
            f"-{tag}",
            f"db-connector-{tag}",
            database,
            names["opstats"],
            names["overloads"],
        )

    @classmethod
    def for_connector(cls, topics: dict[str, str], group: str, database: str) -> Wiring:
        """Just what a connector of its own needs: topics by kind, its group, a database."""
        return cls(
            topics.get("raw", ""),
            topics.get("dlq", ""),
            "",
            "",
            topics.get("joined", ""),
            topics.get("aggregates", ""),
            topics.get("late", ""),
            connector_group=group,
            database=database,
            opstats=topics.get("opstats", ""),
            overloads=topics.get("overloads", ""),
        )

    def bridge_shard(self, shard: int, shards: int) -> Wiring:
        """The wiring of bridge ``shard`` of ``shards`` on disjoint Thing shards: its own topic
        prefix (``<prefix>/<shard>``) and MQTT session; one bridge keeps this wiring as it is."""
        if shards == 1:
            return self
        return dataclasses.replace(
            self,
            prefix=shard_prefix(self.prefix, shard, shards),
            bridge_client_id=f"{self.bridge_client_id}-{shard}",
        )

    @property
    def connector_topics(self) -> dict[str, str]:
        """The topics the connector loads, by kind (those this wiring has)."""
        topics = {
            "raw": self.raw,
            "joined": self.joined,
            "aggregates": self.aggregates,
            "late": self.late,
            "opstats": self.opstats,
            "overloads": self.overloads,
            "dlq": self.dlq,
        }
        return {kind: topic for kind, topic in topics.items() if topic}

    def discard(self, settings: Settings) -> None:
        """Deletes this wiring's topics and database: a long benchmark's run (``fresh``) that
        must not stay on the stack's disk after it."""
        topics = [*self.connector_topics.values(), *([self.markers] if self.markers else [])]
        admin = admin_client(settings)  # held: a client collected early fails its futures
        futures = admin.delete_topics(topics, operation_timeout=30, request_timeout=30)
        answers(futures.values(), 30.0, "deleting the run's topics")
        if self.database:
            InfluxClient(settings).drop_database(self.database)


def private_topic(
    settings: Settings,
    role: str,
    partitions: int = 2,
    *,
    compact: bool = False,
    admin_only: bool = False,
) -> str:
    """A fresh topic (uuid name) with the rights of the pipeline topic of that role
    (stacktools.stack.access); ``admin_only``: no service may use it, and ``role`` only names it
    (checks of the servers themselves)."""
    if not admin_only and role not in TOPIC_RIGHTS:
        raise ValueError(f"unknown topic role {role!r}: one of {', '.join(TOPIC_RIGHTS)}")
    name = f"test.{role}.{uuid.uuid4().hex[:10]}"
    config = (
        {"cleanup.policy": "compact", "min.compaction.lag.ms": "0"}
        if compact
        else {"cleanup.policy": "delete"}
    )
    provision(settings, [TopicSpec(name, partitions, config, role="" if admin_only else role)])
    return name


def private_database(settings: Settings) -> str:
    """A fresh InfluxDB database (the shared one belongs to the demo)."""
    name = f"test_{uuid.uuid4().hex[:10]}"
    InfluxClient(settings).create_scratch_database(name)
    return name
