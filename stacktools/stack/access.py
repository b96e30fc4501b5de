"""Who may do what: the users of Kafka, MQTT and InfluxDB and each one's rights, written once.

The stack launcher creates these users with generated passwords and grants exactly these
rights; topic provisioning grants a topic's rights when it creates it (by the topic's role, so
a test's or a demo run's private topics get the same rights as the declared ones); the README's
access matrix is this table. Every other request is refused by the server itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import zip_longest
from typing import TYPE_CHECKING

from stacktools.compose.credentials import password_problem
from streamkit.fields import credential_env

if TYPE_CHECKING:
    from streamkit.config import ServiceSettings

#: The Spark jobs' Kafka users, one per job: each may read its input, write its own outputs and
#: use its own transactional ids and consumer groups, never another job's.
SPARK_JOB_USERS = ("spark-single-pass", "spark-join", "spark-aggregate")

#: Kafka users of earlier releases: the launcher deletes them and their rights (``spark``: the
#: one user all Spark jobs shared).
RETIRED_KAFKA_USERS = ("spark",)

#: Users per server. ``admin`` is the launcher's (and the tests' oracle reads'); the Kafka
#: ``controller`` user exists only on the KRaft controller listener.
USERS: dict[str, tuple[str, ...]] = {
    "kafka": ("admin", "controller", "bridge", *SPARK_JOB_USERS, "connector", "alerts"),
    "mqtt": ("admin", "machine", "bridge"),
    "influx": ("admin", "connector", "grafana"),
    "spark": (
        "cluster",
    ),  #: the standalone cluster's shared secret (spark.authenticate): master, workers, jobs
}


def _every_job(*rights: str) -> dict[str, tuple[str, ...]]:
    return dict.fromkeys(SPARK_JOB_USERS, rights)


#: Kafka rights per topic role: user -> "read" (Read, Describe) or "write" (Write, Describe).
TOPIC_RIGHTS: dict[str, dict[str, tuple[str, ...]]] = {
    "raw": {"bridge": ("write",), **_every_job("read"), "connector": ("read",)},
    "dlq": {"bridge": ("write",), **_every_job("write"), "connector": ("read", "write")},
    # the aggregate's read: its windows over the joined pairs (--source joined)
    "joined": {
        "spark-single-pass": ("write",),
        "spark-join": ("write",),
        "spark-aggregate": ("read",),
        "connector": ("read",),
    },
    "aggregates": {
        "spark-single-pass": ("write",),
        "spark-aggregate": ("write",),
        "connector": ("read",),
    },
    "late": {**_every_job("write"), "connector": ("read",)},
    # the operation statistics run beside the join: in the single pass or the join job
    "opstats": {
        "spark-single-pass": ("write",),
        "spark-join": ("write",),
        "connector": ("read",),
    },
    "overloads": {
        "spark-single-pass": ("write",),
        "spark-join": ("write",),
        "connector": ("read",),
        "alerts": ("read",),
    },
    "markers": _every_job("read", "write"),
}


@dataclass(frozen=True)
class PrefixGrant:
    """A right on every Kafka group or transactional id starting with ``prefix``."""

    user: str
    resource: str  # group | transactional_id
    prefix: str


#: Consumer groups and transactional ids: each service only its own names. A Spark job's names
#: begin with its user's name and a dot (``streamkit.kafka_clients.owned_name``: the transactional
#: id ``<user>.eos-<query>``, the source's and the marker reads' groups).
PREFIX_GRANTS: tuple[PrefixGrant, ...] = (
    *(
        PrefixGrant(user, resource, f"{user}.")
        for user in SPARK_JOB_USERS
        for resource in ("transactional_id", "group")
    ),
    PrefixGrant("connector", "transactional_id", "db-connector"),
    PrefixGrant("connector", "group", "db-connector"),
    # the forwarder commits nothing, but librdkafka looks up a group's coordinator anyway
    PrefixGrant("alerts", "group", "alerts."),
)

#: MQTT: user -> (access, topic filter below the machine prefix); mosquitto's acl_file words.
MQTT_RIGHTS: dict[str, tuple[str, str]] = {
    "admin": ("readwrite", "#"),
    "machine": ("write", "{prefix}/#"),
    "bridge": ("read", "{prefix}/#"),
}

#: MQTT_MACHINE_IDENTITIES: each machine user (named as its Thing) may publish to its own
#: topic only, unsharded or under a bridge shard (mosquitto's acl_file ``pattern``, %u its name).
MACHINE_PATTERNS: tuple[str, ...] = ("{prefix}/%u", "{prefix}/+/%u")

#: InfluxDB: user -> privilege on each pipeline database (the admin has all privileges).
INFLUX_RIGHTS: dict[str, str] = {"connector": "WRITE", "grafana": "READ"}


def _code(text: str) -> str:
    """``text`` as inline code; an empty cell stays empty."""
    return f"`{text}`" if text else ""


def matrix_markdown() -> list[str]:
    """The README's access matrix (a unit test keeps the README equal to this)."""
    roles = list(TOPIC_RIGHTS)
    lines = [
        "| Kafka user | "
        + " | ".join(f"`{role}` topics" for role in roles)
        + " | groups, transactional ids |",
        "|---" * (len(roles) + 2) + "|",
        "| `admin` | "
        + " | ".join("all" for _ in roles)
        + " | all (super user: topics, users, ACLs) |",
    ]
    for user in USERS["kafka"][2:]:
        cells = [" + ".join(TOPIC_RIGHTS[role].get(user, ())) or "-" for role in roles]
        prefixes = ", ".join(
            f"{g.resource.replace('_', ' ')} `{g.prefix}*`" for g in PREFIX_GRANTS if g.user == user
        )
        lines.append(f"| `{user}` | " + " | ".join(cells) + f" | {prefixes or '-'} |")
    lines += ["", "| MQTT user | may | | InfluxDB user | may |", "|---|---|---|---|---|"]
    influx = [
        ("admin", "all privileges"),
        *((user, f"{right} on the pipeline databases") for user, right in INFLUX_RIGHTS.items()),
    ]
    mqtt = [
        (user, f"{access} `{topic.format(prefix='<MQTT_TOPIC_PREFIX>')}`")
        for user, (access, topic) in MQTT_RIGHTS.items()
    ]
    mqtt.append(
        (
            "<Thing>",
            "write "
            + ", ".join(
                f"`{p.format(prefix='<MQTT_TOPIC_PREFIX>').replace('%u', '<Thing>')}`"
                for p in MACHINE_PATTERNS
            )
            + " (with `MQTT_MACHINE_IDENTITIES`, which drops `machine`)",
        )
    )
    # Two tables side by side: the shorter one's rows run out as empty cells.
    for (m_user, m_may), (i_user, i_may) in zip_longest(mqtt, influx, fillvalue=("", "")):
        lines.append(f"| {_code(m_user)} | {m_may} | | {_code(i_user)} | {i_may} |")
    return lines


def refused_passwords(settings: ServiceSettings, users: dict[str, tuple[str, ...]]) -> list[str]:
    """Why each of ``users``' passwords (system -> users) cannot be used; empty when all can."""
    return [
        problem
        for system, names in users.items()
        for user in names
        if (
            problem := password_problem(
                credential_env(system, user), settings.credential(system, user).reveal()
            )
        )
    ]
